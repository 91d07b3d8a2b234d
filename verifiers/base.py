"""The verifier contract: a verifier declares its options, prepares (request-time checks) and runs one check.

- **Options**: ``Options`` is a ``BaseOptions`` subclass; ``Verifier[MyOptions]`` types ``check``/``acheck`` with it.
- **Prepare**: ``validate(options, lookup)`` runs when the item is accepted, before anything runs; raise to refuse it
  (a 422 on the server). Only checks that need other verifiers (a spec's components) belong here: the options model
  validates itself.
- **Run**: ``execution = "process"``: ``check`` is CPU-bound and pure (math, ifeval, exact match); the engine runs it
  in a pool of worker processes under a hard deadline, so a pathological input can be killed without touching the
  server. ``execution = "async"``: ``acheck`` waits on something else (a sandbox, a judge server, a GPU model); the
  engine awaits it on the event loop under a deadline, and it reaches backends and nested checks through its
  ``Context``.

A verifier returns the verdict it found or raises (``InvalidReference``, ``VerifierUnavailable``, anything else):
the engine owns deadlines, dispatch, metrics and the mapping of every exception to a named verdict.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar, cast

from verifiers.context import Context
from verifiers.options import BaseOptions
from verifiers.types import Verdict, VerifyItem

__all__ = ["BaseOptions", "Prepared", "Verifier", "VerifierLookup"]

OptionsT = TypeVar("OptionsT", bound=BaseOptions)


class VerifierLookup(Protocol):
    """What ``validate`` may ask of the registry: another verifier by name (``UnknownVerifier`` if none)."""

    def get(self, name: str) -> Verifier[Any]: ...


class Verifier(Generic[OptionsT]):
    name: str  # a class attribute; a verifier built per configuration (a named spec) sets its own
    version: ClassVar[str] = "1"
    description: str = ""
    # Subclasses name their own model: the ``OptionsT`` their checks receive.
    Options: ClassVar[type[BaseOptions]] = BaseOptions
    execution: ClassVar[Literal["process", "async"]] = "process"
    # True when scores are 0/1 verdicts (noise correction applies only to those).
    binary: ClassVar[bool] = True
    # Process-mode verifiers whose check is linear in its input and cannot hang (no user-supplied patterns, no
    # parsers with super-linear corners) may run on the event loop when the response and reference are at most this
    # many characters, skipping the worker hop; 0 keeps every check in the killable worker pool.
    inline_max_chars: ClassVar[int] = 0
    # Deadline when the request gives none (None: the server's item_timeout_s); always capped by the server.
    default_timeout_s: ClassVar[float | None] = None
    # Group-level verifiers (``consensus``) score an item against the other items of its request sharing its
    # ``group``: the per-item check runs as usual (in workers), then ``finish_group`` runs once the request's items
    # are all in (see ``verifiers.engine.groups``).
    group_level: ClassVar[bool] = False

    def parse_options(self, raw: dict[str, Any] | None) -> OptionsT:
        """A None value means "not set" (``datasets`` pads a column of dicts with None for every key another row
        has); no option gives None a meaning other than its default, and a set value is still checked."""
        given = {k: v for k, v in (raw or {}).items() if v is not None}
        return cast(OptionsT, self.Options.model_validate(given))

    def inline_ok(self, options: OptionsT) -> bool:
        """Whether these options keep the check cheap enough to run inline (see ``inline_max_chars``)."""
        return True

    def warm_up(self) -> None:
        """Load what the first check would otherwise load (data files, tokenizers); run once per worker at start."""

    def validate(self, options: OptionsT, lookup: VerifierLookup) -> None:
        """The prepare step: request-time checks that need other verifiers; raise to refuse the item."""

    def check_item(self, item: VerifyItem, options: OptionsT) -> Verdict:
        """What the engine calls for a process-mode item; a verifier that reads the trajectory (``item.messages``,
        ``item.tools``) overrides it, every other one checks ``item.response``."""
        return self.check(item.response, item.reference, options)

    async def acheck_item(self, item: VerifyItem, options: OptionsT, ctx: Context) -> Verdict:
        """What the engine awaits for an async item; overridden like ``check_item``."""
        return await self.acheck(item.response, item.reference, options, ctx)

    def check(self, response: str, reference: Any, options: OptionsT) -> Verdict:
        """Synchronous check, run in a worker process (``execution = "process"``)."""
        raise NotImplementedError(f"{self.name} is an async verifier")

    async def acheck(self, response: str, reference: Any, options: OptionsT, ctx: Context) -> Verdict:
        """Asynchronous check, awaited on the event loop (``execution = "async"``)."""
        return self.check(response, reference, options)

    async def finish_group(self, ctx: Context, items: list[Prepared], verdicts: list[Verdict]) -> list[Verdict]:
        """The request-level pass of a group-level verifier: final verdicts for its ``items`` of one request."""
        return verdicts

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "execution": self.execution,
            "binary": self.binary,
            "options_schema": self.Options.model_json_schema(),
        }


@dataclass
class Prepared:
    """An item the engine accepted: its verifier looked up, its options parsed and its prepare step passed."""

    item: VerifyItem
    verifier: Verifier[Any]
    options: BaseOptions
