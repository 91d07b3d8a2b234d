"""Typed results of the service's endpoints, as plain dataclasses (no pydantic, so the client stays httpx-only).

Fields the server adds later land in ``extra`` instead of breaking old clients.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Statuses whose verdict carries a number (mirrors the server's table): the rest mean "no verdict", score null.
SCORED_STATUSES = frozenset({"ok", "no_answer", "rejected"})

T = TypeVar("T", bound="DataclassInstance")


def _build(cls: type[T], data: dict[str, Any]) -> T:
    known = {f.name for f in fields(cls)} - {"extra"}
    kwargs = {k: v for k, v in data.items() if k in known}
    kwargs["extra"] = {k: v for k, v in data.items() if k not in known}
    return cls(**kwargs)


@dataclass
class VerifyResult:
    """One verdict of ``/v1/verify``. ``score`` is None whenever the check could not decide (see ``status``)."""

    score: float | None
    status: str
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    verifier: str = ""
    elapsed_ms: float = 0.0
    turn_scores: list[float] | None = None  # one per assistant turn, from verifiers that define per-turn scores
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scored(self) -> bool:
        """True when the verdict is a real score (including the 0 of no_answer/rejected)."""
        return self.status in SCORED_STATUSES and self.score is not None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VerifyResult:
        return _build(cls, data)


@dataclass
class PrmResult:
    """One item of ``/v1/prm/score``: per-step scores, their aggregate and the first step judged wrong."""

    step_scores: list[float]
    score: float | None
    first_error: int | None = None
    id: str | None = None
    status: str = "ok"  # ok, no_answer (no steps found), error (score null)
    reason: str = ""
    step_rewards: list[float] | None = None  # dense per-step rewards of the clip/delta aggregations
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PrmResult:
        return _build(cls, data)


@dataclass
class SandboxResult:
    """One run of ``/v1/sandbox/run``. ``sandbox_error`` is the sandbox's own failure, never the program's."""

    status: str
    id: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    max_rss_kb: int = 0
    truncated: bool = False
    compile_output: str = ""
    files: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SandboxResult:
        return _build(cls, data)
