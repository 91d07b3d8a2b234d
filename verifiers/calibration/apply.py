"""The calibration stage: post-processing of one raw verdict for ``options.appeal`` and ``options.correction``.

It runs after the engine's check (``Engine(stages=...)``, on by default), never inside it: the engine hands it the
prepared item, the raw verdict and the verifier's ``Context`` (the appeal judge runs as a nested check).

Order: the raw verdict is kept in ``details.raw``; an eligible negative is appealed (the judge's opinion feeds the
online ρ1 estimate); then the correction is applied to the raw score. With ``correction: none`` an overturned
negative scores 1; with a correction the corrected raw score is returned, since the correction already accounts
for false negatives and overturning as well would count them twice.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from verifiers.base import Prepared
from verifiers.calibration.correction import CorrectionUnavailable, NoiseRates, backward, forward_weight
from verifiers.calibration.key import ConfigKey, config_key
from verifiers.calibration.rates import AppealCounts, Rate
from verifiers.calibration.store import CalibrationStore
from verifiers.context import Context, ResourceKey
from verifiers.options import BaseOptions
from verifiers.types import Status, Verdict, VerifyItem


@dataclass
class CalibrationPolicy:
    """The ``calibration`` resource: the store plus the server's choices about using it."""

    store: CalibrationStore | None = None
    default_judge: str | None = None
    wide_interval: float = 0.2  # an interval wider than this gets a warning in the verdict
    min_appeals: int = 30  # appeals needed before the online ρ1 is used for a correction


CALIBRATION: ResourceKey[CalibrationPolicy] = ResourceKey("calibration")


def wants_postprocess(options: BaseOptions) -> bool:
    return options.correction != "none" or options.appeal is not None


def _is_positive(v: Verdict) -> bool:
    return v.status is Status.OK and (v.score or 0.0) >= 0.5


def _appealable(v: Verdict) -> bool:
    """Rule-based negatives: a wrong-answer verdict or a failed extraction. ``rejected`` is a policy guard
    (hedging, hacking), not a comparison that can be mistaken, so it is never appealed."""
    return (v.status is Status.OK and (v.score or 0.0) < 0.5) or v.status is Status.NO_ANSWER


def _sampled(item: VerifyItem, share: float) -> bool:
    if share >= 1.0:
        return True
    blob = json.dumps([item.verifier, item.response, item.reference], sort_keys=True, default=str)
    fraction = int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "big") / 2**64
    return fraction < share


async def _appeal(ctx: Context, p: Prepared, raw: Verdict, policy: CalibrationPolicy,
                  key: ConfigKey) -> dict[str, Any] | None:
    appeal = p.options.appeal
    assert appeal is not None
    judge = appeal.judge or policy.default_judge
    if not judge:
        raise CorrectionUnavailable("appeal requested but no judge is named (options.appeal.judge or the "
                                    "appeal_judge setting)")
    if judge == p.verifier.name or {"appeal", "correction"} & set(appeal.options):
        raise CorrectionUnavailable("an appeal judge must be another verifier, without appeal or correction options")
    eligible = _appealable(raw)
    info: dict[str, Any] | None = None
    delta = AppealCounts(positives=int(_is_positive(raw)), negatives=int(eligible))
    if eligible and _sampled(p.item, appeal.share):
        verdict = await ctx.verify(VerifyItem(judge, p.item.response, p.item.reference, dict(appeal.options),
                                                messages=p.item.messages, tools=p.item.tools))
        info = {"judge": judge, "judge_status": verdict.status.value, "judge_score": verdict.score,
                "judge_reason": verdict.reason}
        if verdict.status.scored:
            info["overturned"] = _is_positive(verdict)
            delta = AppealCounts(delta.positives, delta.negatives, 1, int(info["overturned"]))
        else:
            info["overturned"] = None  # the judge failed: the appeal is void and is not counted
    if policy.store is not None:
        await asyncio.to_thread(policy.store.add_appeals, key, delta)
    elif info is not None:
        info["counted"] = False  # no store: no online estimate to update
    return info


def _rates(p: Prepared, policy: CalibrationPolicy, key: ConfigKey) -> tuple[Rate | None, Rate, str]:
    """(ρ0, ρ1, where they came from) for this configuration, or CorrectionUnavailable."""
    given = p.options.noise_rates
    if given is not None:
        rho0 = None if given.rho0 is None else Rate(0, 0, given.rho0, given.rho0, given.rho0)
        return rho0, Rate(0, 0, given.rho1, given.rho1, given.rho1), "request"
    cal = policy.store.get(key) if policy.store is not None else None
    if cal is None:
        where = "no calibration store is configured" if policy.store is None else "the calibration store has nothing"
        raise CorrectionUnavailable(
            f"no calibration for {key}: {where} for this verifier configuration; run a labelled audit with "
            "--store, enable appeals, or pass options.noise_rates"
        )
    rho0 = cal.counts.rho0()
    online = cal.appeals.online_rho1(rho0.value or 0.0)
    labelled = cal.counts.rho1()
    enough_online = online.value is not None and cal.appeals.appealed >= policy.min_appeals
    if enough_online and (p.options.appeal is not None or labelled.value is None):
        rho1, source = online, "appeals"
    elif labelled.value is not None:
        rho1, source = labelled, "labelled"
    else:
        raise CorrectionUnavailable(
            f"no FN-rate calibration for {key}: no labelled positives and {cal.appeals.appealed} appeals "
            f"(need {policy.min_appeals})"
        )
    return (rho0 if rho0.value is not None else None), rho1, source


def _correct(p: Prepared, raw: Verdict, policy: CalibrationPolicy,
             key: ConfigKey) -> tuple[float | None, dict[str, Any]]:
    mode = p.options.correction
    rho0, rho1, source = _rates(p, policy, key)
    assert rho1.value is not None
    info: dict[str, Any] = {"mode": mode, "rates_source": source, "rho1": rho1.to_dict(),
                            "rho0": rho0.to_dict() if rho0 else None}
    if mode == "backward" and rho0 is None:
        raise CorrectionUnavailable(f"backward correction needs the FP rate rho0 and {key} has no labelled "
                                    "negatives; run a labelled audit with --store or pass options.noise_rates.rho0")
    if rho0 is not None:
        NoiseRates(rho0.value or 0.0, rho1.value).check_backward()  # ρ0 + ρ1 ≥ 1 is an error for both modes
    wide = [f"{name} 95% interval [{r.low:.3f}, {r.high:.3f}] from n={r.n}"
            for name, r in (("rho0", rho0), ("rho1", rho1)) if r is not None and r.width > policy.wide_interval]
    if wide:
        info["warning"] = "uncertain rate: " + "; ".join(wide)
    if raw.status is not Status.OK:
        info["applied"] = False
        info["why"] = f"{raw.status.value} verdicts are guard outcomes, not noisy comparisons; left at 0"
        return None, info
    info["applied"] = True
    assert raw.score is not None
    if mode == "backward":
        assert rho0 is not None  # checked above: backward without rho0 raised
        return backward(raw.score, NoiseRates(rho0.value or 0.0, rho1.value)), info
    return forward_weight(raw.score, rho1.value), info


async def postprocess(ctx: Context, p: Prepared, raw: Verdict) -> Verdict:
    """Apply appeal and correction to a raw verdict; a missing or unusable calibration is status ``error``."""
    if not raw.status.scored:
        return raw  # infrastructure trouble stays exactly what it was
    raw_info = {"score": raw.score, "status": raw.status.value, "reason": raw.reason}
    details = {**raw.details, "raw": raw_info}
    if not p.verifier.binary:
        return Verdict.error(f"correction and appeal apply to binary verifiers only; {p.verifier.name!r} is not",
                             **details)
    policy = ctx.resources.get(CALIBRATION) or CalibrationPolicy()
    key = config_key(p.verifier, p.options)
    details["calibration_key"] = str(key)
    try:
        appeal = await _appeal(ctx, p, raw, policy, key) if p.options.appeal is not None else None
        if appeal is not None:
            details["appeal"] = appeal
        if p.options.correction != "none":
            score, details["correction"] = _correct(p, raw, policy, key)
            if score is not None:
                return Verdict.ok(score, f"{p.options.correction}-corrected: {raw.reason}", **details)
            return Verdict(raw.status, raw.score, raw.reason, details)
    except CorrectionUnavailable as exc:
        return Verdict.error(str(exc), **details)
    if appeal is not None and appeal.get("overturned"):
        return Verdict.ok(1.0, f"overturned on appeal by {appeal['judge']}: {appeal['judge_reason']}", **details)
    return Verdict(raw.status, raw.score, raw.reason, details)


class CalibrationStage:
    """The engine stage that applies ``postprocess`` to the items that ask for it."""

    def applies(self, options: BaseOptions) -> bool:
        return wants_postprocess(options)

    async def run(self, ctx: Context, p: Prepared, raw: Verdict) -> Verdict:
        return await postprocess(ctx, p, raw)
