"""The ProcessBench metric (Zheng et al., 2024) and its data files.

Each sample's label is the index of the earliest wrong step, or -1 when every step is right. A PRM predicts the
index of its first step scored below a threshold (-1 if none). Accuracy is measured separately on erroneous and on
correct samples, and the subset's score is their harmonic mean ("F1" in the paper).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SUBSETS: tuple[str, ...] = ("gsm8k", "math", "olympiadbench", "omnimath")


@dataclass
class SubsetMetric:
    subset: str
    n_error: int
    n_correct: int
    error_acc: float | None
    correct_acc: float | None
    f1: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def processbench_metric(subset: str, labels: Sequence[int], predictions: Sequence[int]) -> SubsetMetric:
    """Accuracy on erroneous samples (exact index), on correct ones (predicted -1), and their harmonic mean.

    An accuracy over zero samples is None, and so is the harmonic mean that needs it; a harmonic mean with a
    zero accuracy is 0.
    """
    if len(labels) != len(predictions):
        raise ValueError(f"{len(labels)} labels but {len(predictions)} predictions")
    err = [(y, p) for y, p in zip(labels, predictions) if y != -1]
    cor = [(y, p) for y, p in zip(labels, predictions) if y == -1]
    error_acc = sum(y == p for y, p in err) / len(err) if err else None
    correct_acc = sum(p == -1 for _, p in cor) / len(cor) if cor else None
    if error_acc is None or correct_acc is None:
        f1 = None
    elif error_acc + correct_acc == 0:
        f1 = 0.0
    else:
        f1 = 2 * error_acc * correct_acc / (error_acc + correct_acc)
    return SubsetMetric(subset, len(err), len(cor), error_acc, correct_acc, f1)


def load_subset(data_dir: str | Path, subset: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Samples of ``processbench_<subset>.json``: problem, steps, label (optionally the first ``limit``)."""
    path = Path(data_dir) / f"processbench_{subset}.json"
    samples = json.loads(path.read_text())
    if not isinstance(samples, list):
        raise ValueError(f"{path} does not hold a list of samples")
    return samples[:limit] if limit else samples
