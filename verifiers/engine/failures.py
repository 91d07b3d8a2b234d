"""The one mapping from "a check ended with an exception" to a named verdict.

Every place that runs a verifier (the engine on the event loop or in a thread, a worker process) hands the
exception here, so a given failure reads the same wherever it happened, and none of them can surface as a score of 0.
"""
from __future__ import annotations

import logging

from verifiers.types import Verdict, VerifierError

log = logging.getLogger(__name__)


def failure_verdict(exc: BaseException, verifier: str, timeout_s: float | None = None) -> Verdict:
    """``timeout`` for an overrun, the status a ``VerifierError`` names for what the verifier said went wrong,
    ``error`` (logged with its traceback) for anything else."""
    if isinstance(exc, TimeoutError):
        return Verdict.timeout(f"check exceeded its {timeout_s:g}s deadline" if timeout_s else "deadline exceeded")
    if isinstance(exc, VerifierError):
        return Verdict(exc.status, None, str(exc), dict(exc.details))
    if isinstance(exc, MemoryError):
        return Verdict.error("verifier ran out of memory in its worker")
    log.error("verifier %s failed", verifier, exc_info=exc)
    return Verdict.error(f"verifier raised {type(exc).__name__}: {str(exc)[:300]}")
