"""Counts and the noise rates they imply, each with a 95% interval.

Wilson score intervals rather than the normal approximation: audits are often small and rates near 0, where the
Wald interval collapses to a point and claims a certainty the data do not have.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar, cast

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Rate:
    """A proportion k/n with its 95% Wilson interval; ``value`` is None when n == 0."""

    k: int
    n: int
    value: float | None
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "k": self.k, "n": self.n}


def wilson(k: int, n: int, z: float = Z95) -> Rate:
    if n <= 0:
        return Rate(0, 0, None, 0.0, 1.0)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Rate(k, n, p, max(0.0, centre - half), min(1.0, centre + half))


_T = TypeVar("_T", bound="_Tally")


class _Tally:
    """Integer counters that add field by field (merging the counts of several audits or windows)."""

    def __add__(self: _T, other: _T) -> _T:
        # Subclasses are dataclasses; the base is not one, so mypy needs to be told.
        sums = (getattr(self, f.name) + getattr(other, f.name) for f in fields(cast(Any, self)))
        return type(self)(*sums)


@dataclass(frozen=True)
class Counts(_Tally):
    """A confusion matrix against true labels (positive = the verifier said correct)."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    def rho0(self) -> Rate:
        """FP rate: P(verifier says 1 | answer wrong)."""
        return wilson(self.fp, self.fp + self.tn)

    def rho1(self) -> Rate:
        """FN rate: P(verifier says 0 | answer right)."""
        return wilson(self.fn, self.fn + self.tp)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class AppealCounts(_Tally):
    """What the online estimate sees: raw positives and negatives, how many negatives were appealed and overturned."""

    positives: int = 0
    negatives: int = 0
    appealed: int = 0
    overturned: int = 0

    def online_rho1(self, rho0: float = 0.0) -> Rate:
        """ρ1 from appeals, treating the appeal judge as ground truth on the negatives it rechecks.

        The overturned share q estimates P(right | said 0), so FN ≈ q·N0 and TN ≈ (1−q)·N0. The raw positives N1
        hold TP plus the false positives FP = TN·ρ0/(1−ρ0) (ρ0 from a labelled audit; 0 when unknown), so
        ρ1 = FN / (TP + FN). It is increasing in q, so mapping q's Wilson interval gives ρ1's interval.
        """
        share = wilson(self.overturned, self.appealed)
        rho0 = min(max(rho0, 0.0), 0.999)
        if share.value is None or self.negatives + self.positives == 0:
            return Rate(self.overturned, self.appealed, None, 0.0, 1.0)

        def rho1_at(q: float) -> float:
            fn = q * self.negatives
            fp = (1.0 - q) * self.negatives * rho0 / (1.0 - rho0)
            tp = max(self.positives - fp, 0.0)
            return fn / (tp + fn) if tp + fn > 0 else 0.0

        return Rate(self.overturned, self.appealed, rho1_at(share.value), rho1_at(share.low), rho1_at(share.high))

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Calibration:
    """Everything the store knows about one verifier configuration."""

    name: str
    version: str
    options_hash: str
    counts: Counts = field(default_factory=Counts)
    appeals: AppealCounts = field(default_factory=AppealCounts)
    sources: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        rho0 = self.counts.rho0()
        return {
            "verifier": self.name,
            "version": self.version,
            "options_hash": self.options_hash,
            "counts": self.counts.to_dict(),
            "rho0": rho0.to_dict(),
            "rho1": self.counts.rho1().to_dict(),
            "appeals": self.appeals.to_dict(),
            "online_rho1": self.appeals.online_rho1(rho0.value or 0.0).to_dict(),
            "sources": self.sources,
        }
