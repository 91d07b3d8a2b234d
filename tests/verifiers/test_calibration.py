"""Calibration store, noise rates, and the backward/forward corrections and appeals applied by the engine.

The simulated verifier (tests/support/plugins/noisy_verifiers.py) reports synthetic true labels through a channel
with known FP rate ρ0 and FN rate ρ1; everything is seeded, so the statistical checks are deterministic.
"""
from __future__ import annotations

import asyncio
import math
import multiprocessing
import random
from pathlib import Path

import pytest

from verifiers.audit import labelled_audit
from verifiers.calibration import AppealCounts, ConfigKey, Counts, SQLiteCalibrationStore, wilson
from verifiers.calibration.apply import CALIBRATION, CalibrationPolicy
from verifiers.calibration.correction import NoiseRates, backward, forward_weight
from verifiers.calibration.key import config_key
from verifiers.engine import Engine
from verifiers.engine.registry import build_registry
from verifiers.types import Status, VerifyItem

RHO0, RHO1, PREVALENCE = 0.25, 0.30, 0.3
NOISY = {"rho0": RHO0, "rho1": RHO1, "seed": 7}
KEY = ConfigKey("v", "1", "abc")


def _engine(tmp_path: Path, **policy: object) -> tuple[Engine, SQLiteCalibrationStore]:
    store = SQLiteCalibrationStore(tmp_path / "cal.sqlite3")
    registry = build_registry(["tests.support.plugins.noisy_verifiers", "tests.support.plugins.testing_verifiers"])
    return Engine(registry, resources={CALIBRATION: CalibrationPolicy(store=store, **policy)}), store


def _synthetic(n: int, seed: int, prefix: str) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(f"{prefix}-{i}", int(rng.random() < PREVALENCE)) for i in range(n)]


def _items(rows: list[tuple[str, int]], options: dict) -> list[VerifyItem]:
    return [VerifyItem("test_noisy", r, {"truth": t}, {**NOISY, **options}) for r, t in rows]


def _verify(engine: Engine, items: list[VerifyItem]):
    return asyncio.run(engine.verify_many(items))


# --- rates and store ------------------------------------------------------------------------------------------------

def test_wilson_interval_matches_reference_values() -> None:
    r = wilson(5, 10)
    assert (round(r.low, 4), round(r.high, 4)) == (0.2366, 0.7634)
    zero = wilson(0, 10)
    assert zero.value == 0.0 and zero.low == 0.0 and round(zero.high, 4) == 0.2775  # not the Wald [0, 0]
    assert wilson(0, 0).value is None and (wilson(0, 0).low, wilson(0, 0).high) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_store_replaces_a_source_and_sums_sources(tmp_path: Path) -> None:
    store = SQLiteCalibrationStore(tmp_path / "c.db")
    assert store.get(KEY) is None
    store.set_counts(KEY, Counts(tp=10, fp=1, tn=9, fn=2), "audit-a")
    store.set_counts(KEY, Counts(tp=10, fp=3, tn=7, fn=0), "audit-a")  # re-run: replaces, not doubles
    store.add_counts(KEY, Counts(tp=5, fp=0, tn=5, fn=5), "audit-b")
    cal = store.get(KEY)
    assert cal is not None and cal.counts == Counts(tp=15, fp=3, tn=12, fn=5)
    assert cal.sources == ["audit-a", "audit-b"]
    assert cal.counts.rho0().value == pytest.approx(3 / 15) and cal.counts.rho1().value == pytest.approx(5 / 20)
    other = ConfigKey("v", "1", "other-options")
    assert store.get(other) is None  # rates belong to a configuration, not a name


def _hammer(path: str, worker: int, rounds: int) -> None:
    store = SQLiteCalibrationStore(path, busy_timeout_s=60)
    for _ in range(rounds):
        store.add_counts(KEY, Counts(tp=1, fn=worker % 2), f"stream-{worker % 2}")
        store.add_appeals(KEY, AppealCounts(positives=1, negatives=2, appealed=1, overturned=worker % 2))
    store.close()


def test_store_is_exact_under_concurrent_writer_processes(tmp_path: Path) -> None:
    path, workers, rounds = str(tmp_path / "shared.db"), 4, 150
    SQLiteCalibrationStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(path, w, rounds)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    cal = SQLiteCalibrationStore(path).get(KEY)
    assert cal is not None
    assert cal.counts == Counts(tp=workers * rounds, fn=(workers // 2) * rounds)  # no lost update
    assert cal.appeals == AppealCounts(workers * rounds, 2 * workers * rounds, workers * rounds, 2 * rounds)


# --- the formulas ---------------------------------------------------------------------------------------------------

def test_backward_and_forward_have_the_expected_conditional_means() -> None:
    rates = NoiseRates(0.2, 0.3)
    # E[R̂ | R=1] = (1-ρ1)·R̂(1) + ρ1·R̂(0) = 1 ;  E[R̂ | R=0] = ρ0·R̂(1) + (1-ρ0)·R̂(0) = 0
    assert 0.7 * backward(1, rates) + 0.3 * backward(0, rates) == pytest.approx(1.0)
    assert 0.2 * backward(1, rates) + 0.8 * backward(0, rates) == pytest.approx(0.0)
    # forward: E[w | R=1] − E[w | R=0] = 1 − ρ0 − ρ1 > 0 (the clean reward, scaled, plus a constant)
    e1 = 0.7 * forward_weight(1, 0.3) + 0.3 * forward_weight(0, 0.3)
    e0 = 0.2 * forward_weight(1, 0.3) + 0.8 * forward_weight(0, 0.3)
    assert e1 - e0 == pytest.approx(1 - 0.2 - 0.3)


# --- through the engine ---------------------------------------------------------------------------------------------

def test_backward_corrected_mean_is_unbiased_within_its_band(tmp_path: Path) -> None:
    engine, store = _engine(tmp_path)
    # 1. calibrate from a labelled audit of this configuration (the store gets the counts)
    audit_rows = [{"response": r, "reference": {"truth": t}, "label": t} for r, t in _synthetic(5000, 1, "audit")]
    report = asyncio.run(labelled_audit(engine, "test_noisy", audit_rows, NOISY, store=store, source="synthetic"))
    rho0, rho1 = report["rho0"], report["rho1"]
    assert rho0["low"] <= RHO0 <= rho0["high"] and rho1["low"] <= RHO1 <= rho1["high"]
    # 2. score fresh rollouts with correction=backward
    rows = _synthetic(12000, 2, "train")
    verdicts = _verify(engine, _items(rows, {"correction": "backward"}))
    assert all(v.status is Status.OK for v in verdicts)
    n = len(rows)
    true_mean = sum(t for _, t in rows) / n
    raw_mean = sum(v.details["raw"]["score"] for v in verdicts) / n
    corrected = [v.score for v in verdicts]
    mean = sum(corrected) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in corrected) / (n - 1))
    # band: sampling error (3 SE) plus the effect of the calibrated rates' own 95% intervals
    corners = [(raw_mean - a) / (1 - a - b) for a in (rho0["low"], rho0["high"]) for b in (rho1["low"], rho1["high"])]
    low, high = min(corners) - 3 * sd / math.sqrt(n), max(corners) + 3 * sd / math.sqrt(n)
    assert low <= true_mean <= high
    assert abs(mean - true_mean) < 0.03
    assert not (low <= raw_mean <= high)  # and the uncorrected mean is biased beyond that band
    first = verdicts[0].details["correction"]
    assert first["mode"] == "backward" and first["rates_source"] == "labelled" and first["applied"] is True


def test_online_rho1_from_appeals_converges_to_the_true_rate(tmp_path: Path) -> None:
    engine, store = _engine(tmp_path)
    estimates = []
    for batch in range(4):
        rows = _synthetic(1500, 10 + batch, f"appeal{batch}")
        verdicts = _verify(engine, _items(rows, {"appeal": {"judge": "test_oracle_judge"}}))
        for (_, truth), v in zip(rows, verdicts):
            if v.details["raw"]["score"] == 0.0:
                assert v.details["appeal"]["overturned"] == bool(truth)  # the verdict says it was appealed
                assert v.score == float(truth)  # correction none: an overturned negative scores 1
            else:
                assert "appeal" not in v.details
        cal = store.entries()[0]
        estimates.append(cal.appeals.online_rho1(0.0))
    # ρ0 = 0.1 here, so the estimate needs ρ0: use the true one, then check the ρ0 = 0 estimate is biased low
    final = cal.appeals.online_rho1(RHO0)
    assert final.low <= RHO1 <= final.high and abs(final.value - RHO1) < 0.03
    assert estimates[-1].value < RHO1  # ignoring false positives among raw positives underestimates ρ1
    widths = [e.width for e in estimates]
    assert widths == sorted(widths, reverse=True) and widths[-1] < widths[0] / 1.8  # tightens with appeals


def test_online_rho1_feeds_forward_correction(tmp_path: Path) -> None:
    engine, _ = _engine(tmp_path, min_appeals=50)
    rows = _synthetic(600, 3, "fwd")
    _verify(engine, _items(rows, {"appeal": {"judge": "test_oracle_judge", "share": 0.5}}))
    verdicts = _verify(engine, _items(rows[:50], {"correction": "forward", "appeal": {"judge": "test_oracle_judge"}}))
    info = verdicts[0].details["correction"]
    assert info["rates_source"] == "appeals"
    for v in verdicts:
        rho1 = v.details["correction"]["rho1"]["value"]  # the online estimate moves as appeals come in
        raw = v.details["raw"]["score"]
        assert v.score == pytest.approx(rho1 if raw == 1.0 else rho1 - 1.0)  # corrected raw score, not overturned


def test_appeal_share_samples_negatives_deterministically(tmp_path: Path) -> None:
    engine, store = _engine(tmp_path)
    rows = _synthetic(1000, 4, "share")
    options = {"appeal": {"judge": "test_oracle_judge", "share": 0.3}}
    first = _verify(engine, _items(rows, options))
    again = _verify(engine, _items(rows, options))
    appealed = ["appeal" in v.details for v in first]
    assert appealed == ["appeal" in v.details for v in again]
    appeals = store.entries()[0].appeals
    assert appeals.appealed == 2 * sum(appealed)
    assert 0.2 < appeals.appealed / appeals.negatives < 0.4


def test_missing_or_unusable_calibration_is_a_named_error_never_a_pass_through(tmp_path: Path) -> None:
    engine, store = _engine(tmp_path)
    item = VerifyItem("test_noisy", "x", {"truth": 1}, {**NOISY, "correction": "backward"})
    v = asyncio.run(engine.verify(item))
    assert v.status is Status.ERROR and v.score is None and "no calibration" in v.reason
    assert v.details["raw"]["status"] == "ok"  # the raw verdict is still visible
    # ρ0 + ρ1 ≥ 1: a verifier no better than inverted chance
    bad = VerifyItem("test_noisy", "x", {"truth": 1}, {**NOISY, "correction": "backward",
                                                      "noise_rates": {"rho0": 0.6, "rho1": 0.5}})
    v = asyncio.run(engine.verify(bad))
    assert v.status is Status.ERROR and ">= 1" in v.reason
    # backward needs ρ0; a store with only appeal data cannot give it
    prepared = engine.prepare(item)
    store.add_appeals(config_key(prepared.verifier, prepared.options), AppealCounts(100, 100, 100, 10))
    v = asyncio.run(engine.verify(item))
    assert v.status is Status.ERROR and "rho0" in v.reason
    # non-binary verifiers cannot be corrected
    v = asyncio.run(engine.verify(VerifyItem("test_graded", "x", None, {"correction": "forward",
                                                                          "noise_rates": {"rho1": 0.1}})))
    assert v.status is Status.ERROR and "binary" in v.reason
    # an appeal without any judge named
    v = asyncio.run(engine.verify(VerifyItem("test_noisy", "y", {"truth": 0}, {**NOISY, "appeal": True})))
    assert v.status is Status.ERROR and "judge" in v.reason


def test_wide_interval_warns_and_unscored_verdicts_pass_untouched(tmp_path: Path) -> None:
    engine, store = _engine(tmp_path)
    item = VerifyItem("test_noisy", "z", {"truth": 1}, {**NOISY, "correction": "backward"})
    prepared = engine.prepare(item)
    key = config_key(prepared.verifier, prepared.options)
    store.set_counts(key, Counts(tp=8, fp=1, tn=9, fn=2), "tiny")
    v = asyncio.run(engine.verify(item))
    assert v.status is Status.OK and "uncertain rate" in v.details["correction"]["warning"]
    broken = asyncio.run(engine.verify(VerifyItem("test_noisy", "z", "not a dict",
                                                  {**NOISY, "correction": "backward"})))
    assert broken.status is Status.INVALID_REFERENCE and broken.score is None
    # a judge that is down voids the appeal instead of deciding it
    v = asyncio.run(engine.verify(VerifyItem("test_noisy", "flip-me", {"truth": 0},
                                             {**NOISY, "rho0": 0.0, "appeal": {"judge": "test_down"}})))
    assert v.status is Status.OK and v.score == 0.0
    assert v.details["appeal"]["judge_status"] == "unavailable" and v.details["appeal"]["overturned"] is None
