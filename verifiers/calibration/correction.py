"""Noise corrections for binary rewards (Cai et al., "RL with Verifiable yet Noisy Rewards under Imperfect
Verifiers", arXiv 2510.00915, §3).

The verifier is a noisy channel on the true reward R ∈ {0,1}: it reports R̃ = 1 for a wrong answer with
probability ρ0 (FP rate) and R̃ = 0 for a right one with probability ρ1 (FN rate).
"""
from __future__ import annotations

from dataclasses import dataclass


class CorrectionUnavailable(Exception):
    """The rates needed for a correction are missing or unusable; the item gets status ``error`` with this text."""


@dataclass(frozen=True)
class NoiseRates:
    rho0: float
    rho1: float

    def check_backward(self) -> None:
        if not (0.0 <= self.rho0 < 1.0 and 0.0 <= self.rho1 < 1.0):
            raise CorrectionUnavailable(f"noise rates must lie in [0, 1): rho0={self.rho0:g}, rho1={self.rho1:g}")
        if self.rho0 + self.rho1 >= 1.0:
            raise CorrectionUnavailable(
                f"rho0 + rho1 = {self.rho0 + self.rho1:.4g} >= 1: the verifier carries no usable signal "
                "(its verdicts are no better than inverted chance), so no correction can de-bias it"
            )


def backward(observed: float, rates: NoiseRates) -> float:
    """Unbiased surrogate reward, paper §3 (backward correction): R̂ = (R̃ − ρ0) / (1 − ρ0 − ρ1).

    E[R̂ | R=1] = ((1−ρ1) − ρ0)/(1−ρ0−ρ1) = 1 and E[R̂ | R=0] = (ρ0 − ρ0)/(1−ρ0−ρ1) = 0, so its mean is the clean
    reward's mean. It can leave [0, 1] (negative for an observed 0), which is the price of unbiasedness.
    """
    rates.check_backward()
    return (observed - rates.rho0) / (1.0 - rates.rho0 - rates.rho1)


def forward_weight(observed: float, rho1: float) -> float:
    """Score-function weight of the paper's forward correction (§3, PGFC): w1 = ρ1 for R̃ = 1, w0 = ρ1 − 1 for R̃ = 0.

    Only ρ1 is needed. Derivation under the channel above: E[w | R=1] = (1−ρ1)ρ1 + ρ1(ρ1−1) = 0 and
    E[w | R=0] = ρ0ρ1 + (1−ρ0)(ρ1−1) = −(1−ρ0−ρ1), so E[w | R] = (1−ρ0−ρ1)·R − (1−ρ0−ρ1): the clean reward scaled by
    a positive factor plus a constant, which vanishes against E[∇ log π] = 0. The expected update therefore points
    along the clean gradient (while ρ0 + ρ1 < 1).
    """
    if not 0.0 <= rho1 < 1.0:
        raise CorrectionUnavailable(f"rho1 must lie in [0, 1), got {rho1:g}")
    return rho1 if observed >= 0.5 else rho1 - 1.0
