"""The engine contract: ``on_result`` fires once per top-level item (never for nested checks), every failure is
one named verdict wherever it happens, and post-processing runs as a stage after the check."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from verifiers.base import BaseOptions, Prepared, Verifier
from verifiers.calibration.apply import CalibrationStage
from verifiers.context import Context
from verifiers.engine import Engine
from verifiers.engine.failures import failure_verdict
from verifiers.engine.registry import build_registry
from verifiers.types import InvalidReference, Status, Verdict, VerifierUnavailable, VerifyItem

PLUGINS = ["tests.support.plugins.noisy_verifiers", "tests.support.plugins.testing_verifiers"]


def _engine(**kwargs: Any) -> tuple[Engine, list[tuple[str, Status]]]:
    reported: list[tuple[str, Status]] = []
    engine = Engine(build_registry(PLUGINS), default_timeout_s=30.0,
                    on_result=lambda name, v: reported.append((name, v.status)), **kwargs)
    return engine, reported


def test_a_spec_is_reported_once_not_per_component() -> None:
    engine, reported = _engine()
    spec = {"components": [
        {"name": "exact", "verifier": "exact_match"},
        {"name": "math", "verifier": "math"},
        {"name": "fmt", "verifier": "format", "options": {"template": "boxed"}, "gate": True, "use_reference": False},
    ]}
    verdict = asyncio.run(engine.verify(VerifyItem("spec", "\\boxed{4}", "4", spec)))
    assert verdict.status is Status.OK and set(verdict.details["components"]) == {"exact", "math", "fmt"}
    assert reported == [("spec", Status.OK)]


def test_consensus_weights_and_pair_checks_are_not_reported() -> None:
    engine, reported = _engine()
    # weight_by runs exact_match per vote, and \frac{\sqrt{2}}{2} vs \sqrt{2}/2 needs a nested math pair check
    answers = ["\\frac{\\sqrt{2}}{2}", "\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}", "7"]
    options = {"weight_by": {"verifier": "test_graded"}}
    items = [VerifyItem("consensus", f"The answer is $\\boxed{{{a}}}$.", None, options, group="g") for a in answers]
    verdicts = asyncio.run(engine.verify_many(items))
    assert [v.score for v in verdicts] == [1.0, 1.0, 1.0, 0.0], [v.reason for v in verdicts]
    assert all(v.details["weight"] == 0.5 for v in verdicts)
    assert reported == [("consensus", Status.OK)] * 4


def test_an_appeal_is_reported_with_its_item_only() -> None:
    engine, reported = _engine()
    options = {"rho0": 0.0, "rho1": 1.0, "appeal": {"judge": "test_oracle_judge"}}
    item = VerifyItem("test_noisy", "r", {"truth": 1}, options)
    verdict = asyncio.run(engine.verify(item))
    assert verdict.details["appeal"]["overturned"] is True and verdict.score == 1.0
    assert reported == [("test_noisy", Status.OK)]


def test_a_hybrid_judge_rule_pass_is_not_reported() -> None:
    engine, reported = _engine()
    item = VerifyItem("judge_reference", "The answer is \\boxed{4}.", "4", {"hybrid": "math"})
    verdict = asyncio.run(engine.verify(item))
    assert verdict.details["settled_by"] == "math"  # settled by the rule: no judge backend needed
    assert reported == [("judge_reference", Status.OK)]


def test_a_group_level_item_verified_alone_is_reported() -> None:
    engine, reported = _engine()
    verdict = asyncio.run(engine.verify(VerifyItem("consensus", "\\boxed{3}", None, {})))
    assert verdict.status is Status.GROUP_TOO_SMALL
    assert reported == [("consensus", Status.GROUP_TOO_SMALL)]


class _Raises(Verifier[BaseOptions]):
    name = "contract_raises"
    execution = "async"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def acheck(self, response: str, reference: Any, options: BaseOptions, ctx: Context) -> Verdict:
        raise self.exc


@pytest.mark.parametrize("exc, status", [
    (InvalidReference("no tests"), Status.INVALID_REFERENCE),
    (VerifierUnavailable("judge down"), Status.UNAVAILABLE),
    (TimeoutError(), Status.TIMEOUT),
    (ZeroDivisionError("bug"), Status.ERROR),
])
def test_every_exception_becomes_the_named_verdict_of_failure_verdict(exc: BaseException, status: Status) -> None:
    engine, reported = _engine()
    engine.registry.register(_Raises(exc))
    verdict = asyncio.run(engine.verify(VerifyItem("contract_raises", "r")))
    expected = failure_verdict(exc, "contract_raises", engine.timeout_for(engine.prepare(VerifyItem("contract_raises",
                                                                                                    "r"))))
    assert (verdict.status, verdict.score, verdict.reason) == (status, None, expected.reason)
    assert reported == [("contract_raises", status)]


def test_stages_are_composed_after_the_engine() -> None:
    item = VerifyItem("test_noisy", "r", {"truth": 1}, {"rho0": 0.0, "rho1": 1.0, "correction": "forward",
                                                          "noise_rates": {"rho1": 0.5}})
    bare, _ = _engine(stages=())
    assert asyncio.run(bare.verify(item)).details == {}  # no stage: the raw verdict
    calibrated, _ = _engine()
    assert isinstance(calibrated.stages[0], CalibrationStage)
    assert asyncio.run(calibrated.verify(item)).details["correction"]["mode"] == "forward"

    class Tag:
        def applies(self, options: BaseOptions) -> bool:
            return True

        async def run(self, ctx: Context, p: Prepared, raw: Verdict) -> Verdict:
            return Verdict(raw.status, raw.score, raw.reason, {**raw.details, "tagged": p.verifier.name})

    tagged, reported = _engine(stages=[Tag()])
    assert asyncio.run(tagged.verify(VerifyItem("exact_match", "a", "a"))).details["tagged"] == "exact_match"
    assert reported == [("exact_match", Status.OK)]
