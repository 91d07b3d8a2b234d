"""What a verifier may reach while it runs: shared backends, and nested checks of other verifiers.

Resources are built by whoever owns their lifetime (the server's lifespan, a CLI run) and handed in by name, so the
verifier library never imports the server. Nested checks (a spec's components, a hybrid judge's rule pass, an
appeal, consensus' vote weights) go through ``verify`` / ``verify_many`` here: the engine runs them under the same
deadlines and failure mapping as any item, but reports only the top-level item to ``on_result``.
"""
from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verifiers.types import Verdict, VerifierUnavailable, VerifyItem

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
class Context:
    resources: Mapping[str, Any]
    verify: NestedVerify  # one nested item; raises UnknownVerifier / ValidationError if it cannot be prepared
    verify_many: NestedVerifyMany  # nested items, cheap ones inline, the rest concurrently, with the group pass

    @property
    def source(self) -> str:
        """The request the running check belongs to ("" outside one)."""
        return request_source.get()

    def resource(self, name: str) -> Any:
        """A named backend (``sandbox``, ``judges``, ``models``, ``calibration``...); unavailable if not configured."""
        try:
            return self.resources[name]
        except KeyError:
            raise VerifierUnavailable(f"backend {name!r} is not configured on this server") from None
