"""What a verifier may reach while it runs: shared backends, and nested checks of other verifiers.

Resources are built by whoever owns their lifetime (the server's lifespan, a CLI run) and handed in under typed keys
(``ResourceKey``: ``SANDBOX`` here, ``JUDGES``, ``MODELS`` and ``CALIBRATION`` beside the types they hold), so the
verifier library never imports the server and a verifier's ``ctx.resource(SANDBOX)`` is typed.

Nested checks (a spec's components, a hybrid judge's rule pass, an appeal, consensus' vote weights) go through
``verify`` / ``verify_many`` here: the engine runs them under the same deadlines and failure mapping as any item, but
reports only the top-level item to ``on_result``.
"""
from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from sandbox.api import Backend
from verifiers.types import Verdict, VerifierUnavailable, VerifyItem

T = TypeVar("T")

NestedVerify = Callable[[VerifyItem], Awaitable[Verdict]]
NestedVerifyMany = Callable[[Sequence[VerifyItem]], Awaitable[list[Verdict]]]

# Who the running checks are for (the server sets its request id): the worker pool's backlog and the backends a check
# reaches take turns between sources, so one request's thousands of items cannot starve another's.
request_source: contextvars.ContextVar[str] = contextvars.ContextVar("request_source", default="")

# What this process was configured with for the kinds (a worker's ``WorkerConfig``, e.g. ``length_tokenizers``): the
# worker sets it before importing any verifier and a kind reads its own entry lazily, so the worker never needs to
# know which kind reads what.
_PROCESS_SETTINGS: dict[str, Any] = {}


def configure_process(settings: Mapping[str, Any]) -> None:
    _PROCESS_SETTINGS.clear()
    _PROCESS_SETTINGS.update(settings)


def process_setting(name: str) -> Any:
    """This process's setting ``name`` (None when it was not configured)."""
    return _PROCESS_SETTINGS.get(name)


@dataclass(frozen=True)
class ResourceKey(Generic[T]):
    """A shared backend's name, typed by what it holds."""

    name: str


SANDBOX: ResourceKey[Backend] = ResourceKey("sandbox")


@runtime_checkable
class Warming(Protocol):
    """A resource that starts in the background (a warm sandbox pool, a local judge, reward models): /readyz waits
    until it is ``ready``; a ``not_ready_reason`` says it failed rather than is still starting."""

    @property
    def ready(self) -> bool: ...

    @property
    def not_ready_reason(self) -> str: ...


class Resources:
    """The shared backends of a run, by typed key."""

    def __init__(self, entries: Mapping[ResourceKey[Any], Any] | None = None) -> None:
        self._entries: dict[ResourceKey[Any], Any] = {}
        self.add(entries or {})

    def get(self, key: ResourceKey[T]) -> T | None:
        value: T | None = self._entries.get(key)
        return value

    def add(self, entries: Mapping[ResourceKey[Any], Any]) -> None:
        wrong = [key for key in entries if not isinstance(key, ResourceKey)]
        if wrong:  # a plain name would never be found: every lookup is by key
            raise TypeError(f"resources are keyed by ResourceKey, not {wrong!r}")
        self._entries.update(entries)

    def __iter__(self) -> Iterator[tuple[ResourceKey[Any], Any]]:
        return iter(list(self._entries.items()))

    def waiting(self) -> list[tuple[str, str]]:
        """(name, reason) of every resource not ready yet: reason "" while it is still starting."""
        return [(key.name, value.not_ready_reason) for key, value in self
                if isinstance(value, Warming) and not value.ready]


@dataclass(frozen=True)
class Context:
    resources: Resources
    verify: NestedVerify  # one nested item; raises UnknownVerifier / ValidationError if it cannot be prepared
    verify_many: NestedVerifyMany  # nested items, cheap ones inline, the rest concurrently, with the group pass

    @property
    def source(self) -> str:
        """The request the running check belongs to ("" outside one)."""
        return request_source.get()

    def resource(self, key: ResourceKey[T]) -> T:
        """A shared backend; ``unavailable`` if it is not configured."""
        value = self.resources.get(key)
        if value is None:
            raise VerifierUnavailable(f"backend {key.name!r} is not configured on this server")
        return value
