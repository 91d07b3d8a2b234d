"""Verdict types shared by every verifier, the engine and the HTTP layer.

A verdict always says *what happened* (``status``) apart from *how good the answer was* (``score``):
infrastructure trouble carries a null score so a trainer can never mistake it for a wrong answer.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar


class Status(str, enum.Enum):
    OK = "ok"  # score is the verdict
    NO_ANSWER = "no_answer"  # the response holds no answer: score 0
    REJECTED = "rejected"  # a guard refused the response (hedging, hacking pattern): score 0
    INVALID_REFERENCE = "invalid_reference"  # the reference cannot be used: score null
    TIMEOUT = "timeout"  # the check overran its deadline: score null
    ERROR = "error"  # a verifier fault: score null
    UNAVAILABLE = "unavailable"  # a backend (judge, sandbox, model) is down: score null
    NO_CONSENSUS = "no_consensus"  # a label-free group has no clear majority answer (tie, weak plurality): score null
    GROUP_TOO_SMALL = "group_too_small"  # too few readable answers in the group to vote on: score null
    CANCELLED = "cancelled"  # stopped before it was decided (client gone, job deleted, server shutting down): null

    @property
    def scored(self) -> bool:
        """Whether a verdict of this status carries a numeric score."""
        return self in _SCORED


_SCORED = frozenset({Status.OK, Status.NO_ANSWER, Status.REJECTED})
_ZERO = frozenset({Status.NO_ANSWER, Status.REJECTED})


@dataclass
class Verdict:
    status: Status
    score: float | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    elapsed_ms: float = 0.0
    # One score per assistant turn of a trajectory (``verifiers.conversation.assistant_turns``), for trainers that
    # assign credit per turn; set only by verifiers that define per-turn scores.
    turn_scores: list[float] | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.status in _ZERO:
            self.score = 0.0
        elif not self.status.scored:
            self.score = None
        elif self.score is None:
            raise ValueError("an ok verdict needs a score")
        else:
            self.score = float(self.score)

    # Constructors that read like the statuses they build.
    @classmethod
    def ok(cls, score: float, reason: str = "", **details: Any) -> Verdict:
        return cls(Status.OK, float(score), reason, details)

    @classmethod
    def no_answer(cls, reason: str = "no answer found", **details: Any) -> Verdict:
        return cls(Status.NO_ANSWER, 0.0, reason, details)

    @classmethod
    def rejected(cls, reason: str, **details: Any) -> Verdict:
        return cls(Status.REJECTED, 0.0, reason, details)

    @classmethod
    def invalid_reference(cls, reason: str, **details: Any) -> Verdict:
        return cls(Status.INVALID_REFERENCE, None, reason, details)

    @classmethod
    def timeout(cls, reason: str = "deadline exceeded", **details: Any) -> Verdict:
        return cls(Status.TIMEOUT, None, reason, details)

    @classmethod
    def error(cls, reason: str, **details: Any) -> Verdict:
        return cls(Status.ERROR, None, reason, details)

    @classmethod
    def unavailable(cls, reason: str, **details: Any) -> Verdict:
        return cls(Status.UNAVAILABLE, None, reason, details)

    @classmethod
    def cancelled(cls, reason: str, **details: Any) -> Verdict:
        return cls(Status.CANCELLED, None, reason, details)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "score": self.score,
            "status": self.status.value,
            "reason": self.reason,
            "details": self.details,
            "elapsed_ms": self.elapsed_ms,
        }
        if self.turn_scores is not None:
            out["turn_scores"] = self.turn_scores
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            Status(data["status"]),
            data.get("score"),
            data.get("reason", ""),
            dict(data.get("details") or {}),
            float(data.get("elapsed_ms") or 0.0),
            _turn_scores(data.get("turn_scores")),
        )


def _turn_scores(value: Any) -> list[float] | None:
    return None if value is None else [float(v) for v in value]


@dataclass
class VerifyItem:
    """One thing to check, as it travels inside the library (the HTTP schema mirrors it).

    A trajectory item carries ``messages`` (OpenAI chat messages) and may carry ``tools`` (the tool specs the model
    was given); its ``response`` is then the text of the final assistant turn (``verifiers.conversation.final_text``).
    """

    verifier: str
    response: str
    reference: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    group: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None


class VerifierError(Exception):
    """What a verifier raises when it cannot give a score, one subclass per named status. The engine turns it into
    a verdict in one place (``verifiers.engine.failures.failure_verdict``): the message becomes the reason, ``details``
    the verdict's details, so none of them can read as a score of 0 and a verifier never builds a failure verdict."""

    status: ClassVar[Status] = Status.ERROR

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class VerifierFailed(VerifierError):
    """The check itself failed (a judge's unreadable answers, a reward model's fault): ``error``."""


class VerifierUnavailable(VerifierError):
    """A backend the verifier needs is down or not configured: ``unavailable``."""

    status = Status.UNAVAILABLE


class InvalidReference(VerifierError):
    """The reference cannot be used: ``invalid_reference``."""

    status = Status.INVALID_REFERENCE


class UnknownVerifier(KeyError):
    """No verifier of this name is registered: the item cannot be prepared (a 422 on the server)."""

    def __init__(self, name: str, known: Iterable[str]):
        super().__init__(name)
        self.name = name
        self.known = sorted(known)

    def __str__(self) -> str:
        return f"unknown verifier {self.name!r}; known: {', '.join(self.known)}"
