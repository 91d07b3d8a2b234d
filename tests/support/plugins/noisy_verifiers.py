"""A verifier with known noise, and an oracle judge, for testing corrections and appeals.

The item's true label travels in the reference (``{"truth": 0 or 1}``); the simulated verifier reports it through a
noisy channel with FP rate ``rho0`` and FN rate ``rho1``. The flips come from a hash of (seed, response), so a run is
reproducible and two items with different responses flip independently.
"""
from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.types import InvalidReference, Verdict


def _uniform(seed: int, text: str) -> float:
    digest = hashlib.sha256(f"{seed}\x00{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _truth(reference: Any) -> int:
    if not isinstance(reference, dict) or reference.get("truth") not in (0, 1):
        raise InvalidReference('reference must be {"truth": 0 or 1}')
    return int(reference["truth"])


class NoisyOptions(BaseOptions):
    rho0: float = Field(0.1, ge=0, le=1)
    rho1: float = Field(0.2, ge=0, le=1)
    seed: int = 0


class NoisyVerifier(Verifier):
    name = "test_noisy"
    description = "Reports the reference's truth through a channel with FP rate rho0 and FN rate rho1."
    Options = NoisyOptions

    def check(self, response: str, reference: Any, options: NoisyOptions) -> Verdict:
        truth, u = _truth(reference), _uniform(options.seed, response)
        flipped = u < (options.rho1 if truth else options.rho0)
        return Verdict.ok(float(truth ^ flipped), "flipped" if flipped else "faithful")


class OracleOptions(BaseOptions):
    error_rate: float = Field(0.0, ge=0, le=1)
    seed: int = 1


class OracleJudge(Verifier):
    name = "test_oracle_judge"
    description = "An async 'judge' that knows the truth (wrong with probability error_rate)."
    execution = "async"
    Options = OracleOptions

    async def acheck(self, response: str, reference: Any, options: OracleOptions, ctx: Any) -> Verdict:
        await asyncio.sleep(0)
        truth = _truth(reference)
        wrong = _uniform(options.seed, response) < options.error_rate
        return Verdict.ok(float(truth ^ wrong), "oracle")


class Graded(Verifier):
    name = "test_graded"
    binary = False

    def check(self, response: str, reference: Any, options: BaseOptions) -> Verdict:
        return Verdict.ok(0.5, "half")


class Contains(Verifier):
    name = "test_contains"
    description = "A deliberately naive verifier: passes when the reference text appears anywhere in the response."

    def check(self, response: str, reference: Any, options: BaseOptions) -> Verdict:
        if not response.strip():
            return Verdict.no_answer()
        return Verdict.ok(float(str(reference) in response), "substring check")


VERIFIERS: list[Verifier] = [NoisyVerifier(), OracleJudge(), Graded(), Contains()]
