"""From per-step scores to one reward, by the rules PRM users apply.

- ``min``: the weakest step (PURE / "Stop Summation" min-form credit assignment).
- ``prod``: probability that every step is right, if steps were independent.
- ``mean``, ``last``, ``sum``: as named; ``sum`` is unbounded and can be farmed by repeating good steps.
- ``clip`` and ``delta`` (Gao et al., "On Designing Effective RL Reward at Training Time for LLM Reasoning"):
  per-step rewards whose sum is bounded, so repetition cannot raise it.
  clip: ``r_k = min(s_k - eta, 0)``, eta = the threshold; the score is their sum (<= 0).
  delta: ``r_k = s_k - s_{k+1}`` for k < K-1, ``r_{K-1} = s_{K-1}``, ``r_K = 0`` (the last step is left to the
  outcome reward); the return from any step k < K is then s_k, and the score (the sum) is s_1.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

Aggregation = Literal["min", "prod", "mean", "last", "sum", "clip", "delta"]
AGGREGATIONS: tuple[str, ...] = ("min", "prod", "mean", "last", "sum", "clip", "delta")


def step_rewards(scores: Sequence[float], how: Aggregation, threshold: float = 0.5) -> list[float] | None:
    """The per-step dense rewards of the bounded transforms (clip, delta); None for the other aggregations."""
    s = [float(x) for x in scores]
    if how == "clip":
        return [min(x - threshold, 0.0) for x in s]
    if how == "delta":
        if not s:
            return []
        return [s[k] - s[k + 1] for k in range(len(s) - 2)] + ([s[-2]] if len(s) >= 2 else []) + [0.0]
    return None


def aggregate(scores: Sequence[float], how: Aggregation, threshold: float = 0.5) -> float:
    """One reward for a step-score sequence; an empty sequence raises (there is nothing to score)."""
    if not scores:
        raise ValueError("no steps to aggregate")
    s = [float(x) for x in scores]
    if how == "min":
        return min(s)
    if how == "prod":
        return math.prod(s)
    if how == "mean":
        return math.fsum(s) / len(s)
    if how == "last":
        return s[-1]
    if how == "sum":
        return math.fsum(s)
    if how in ("clip", "delta"):
        return math.fsum(step_rewards(s, how, threshold) or [])
    raise ValueError(f"unknown aggregation {how!r}; known: {', '.join(AGGREGATIONS)}")


def first_error(scores: Sequence[float], threshold: float = 0.5) -> int | None:
    """Index of the first step scored below ``threshold`` (ProcessBench's prediction rule); None if none is."""
    for i, x in enumerate(scores):
        if x < threshold:
            return i
    return None
