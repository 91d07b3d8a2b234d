"""Per-group statistics of a batch (a GRPO group = the rollouts of one prompt), so a trainer can drop groups with
no signal (DAPO dynamic sampling) without recomputing them."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def group_stats(groups: Sequence[str | None], scores: Sequence[float | None]) -> dict[str, dict[str, Any]]:
    """mean and population std over the non-null scores; ``all_equal`` is true when every item of the group has a
    score and they are all the same (a group with a null is never reported as signal-free)."""
    members: dict[str, list[float | None]] = {}
    for gid, score in zip(groups, scores):
        if gid is not None:
            members.setdefault(gid, []).append(score)
    out: dict[str, dict[str, Any]] = {}
    for gid, values in members.items():
        mean: float | None
        std: float | None
        present = [v for v in values if v is not None]
        nulls = len(values) - len(present)
        if present:
            mean = math.fsum(present) / len(present)
            std = math.sqrt(math.fsum((v - mean) ** 2 for v in present) / len(present))
        else:
            mean = std = None
        out[gid] = {
            "count": len(values),
            "null_count": nulls,
            "mean": mean,
            "std": std,
            "all_equal": bool(present) and nulls == 0 and max(present) == min(present),
        }
    return out
