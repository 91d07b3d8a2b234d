"""The verifier contract: a name, a version, an options schema and one check.

Two execution modes exist because the work differs in kind:
- ``process``: CPU-bound, pure checks (math, ifeval, exact match). The engine runs ``check`` in a pool of worker
  processes under a hard deadline, so a pathological input can be killed without touching the server.
- ``async``: checks that wait on something else (a sandbox, a judge server, a GPU model). The engine awaits
  ``acheck`` on the event loop with a deadline; the heavy lifting happens in the backend.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from verifiers.calibration.options import AppealOptions, Correction, NoiseRatesOptions
from verifiers.types import Verdict

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.context import Context
    from verifiers.engine import Engine, Prepared
    from verifiers.registry import Registry


class BaseOptions(BaseModel):
    """Options every verifier accepts; verifiers subclass this with their own fields."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float | None = Field(
        default=None, gt=0, description="Per-item deadline in seconds (capped by the server's maximum)."
    )
    # Noise correction and appeals (issue 9), applied by the engine after the raw verdict; binary verifiers only.
    correction: Correction = Field(
        "none", description="none | backward (unbiased surrogate reward) | forward (policy-gradient weights)."
    )
    appeal: AppealOptions | None = Field(None, description="Recheck rule-based negatives with a judge verifier.")
    noise_rates: NoiseRatesOptions | None = Field(None, description="Known rates; otherwise the calibration store.")

    @field_validator("appeal", mode="before")
    @classmethod
    def _appeal_shorthand(cls, value: Any) -> Any:
        return {} if value is True else None if value is False else value


class Verifier:
    name: ClassVar[str]
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ""
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
    # are all in (see ``verifiers.group_level``).
    group_level: ClassVar[bool] = False

    def parse_options(self, raw: dict[str, Any] | None) -> BaseOptions:
        """A None value means "not set" (``datasets`` pads a column of dicts with None for every key another row
        has, issue 18); no option gives None a meaning other than its default, and a set value is still checked."""
        return self.Options.model_validate({k: v for k, v in (raw or {}).items() if v is not None})

    def inline_ok(self, options: BaseOptions) -> bool:
        """Whether these options keep the check cheap enough to run inline (see ``inline_max_chars``)."""
        return True

    def warm_up(self) -> None:
        """Load what the first check would otherwise load (data files, tokenizers); run once per worker at start."""

    def validate(self, options: BaseOptions, registry: Registry) -> None:
        """Request-time checks that need the registry (e.g. a spec's component names); raise to refuse the item."""

    def check(self, response: str, reference: Any, options: BaseOptions) -> Verdict:
        """Synchronous check, run in a worker process (``execution = "process"``)."""
        raise NotImplementedError(f"{self.name} is an async verifier")

    async def acheck(self, response: str, reference: Any, options: BaseOptions, ctx: Context) -> Verdict:
        """Asynchronous check, awaited on the event loop (``execution = "async"``)."""
        return self.check(response, reference, options)

    async def finish_group(self, engine: Engine, items: list[Prepared], verdicts: list[Verdict]) -> list[Verdict]:
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
