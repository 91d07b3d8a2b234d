"""The ``math_verify`` verifier: Math-Verify's verdicts on real MATH-500 rows, the statuses it maps to, its
options, a deadline enforced by the real worker pool, and the verifier over REST."""
from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import LiveServer
from verifiers.engine import Engine
from verifiers.engine.pool import WorkerPool
from verifiers.engine.registry import BUILTIN_MODULES, build_registry
from verifiers.types import Status, Verdict, VerifyItem

MODULE = "verifiers.kinds.math.math_verify_verifier"
# A gold Math-Verify evaluates for as long as it is let: 10^(10^10) has ten billion digits (CPU, little memory).
HANG = r"$\boxed{10^{10^{10^{10}}}}$"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(build_registry())  # no pool: exceptions are mapped by the engine, as in library use


def check(engine: Engine, response: str, reference: Any, **options: Any) -> Verdict:
    return asyncio.run(engine.verify(VerifyItem("math_verify", response, reference, options)))


def test_registered_as_a_builtin() -> None:
    assert MODULE in BUILTIN_MODULES
    verifier = build_registry().get("math_verify")
    props = verifier.describe()["options_schema"]["properties"]
    assert {"float_rounding", "numeric_precision", "strict", "timeout_s"} <= set(props)
    assert verifier.execution == "process" and verifier.inline_max_chars == 0  # always in the killable pool


def test_math500_gold_against_own_and_next_solution(engine: Engine, shared_data: Path) -> None:
    rows = [json.loads(line) for line in (shared_data / "math" / "math500.test.jsonl").read_text().splitlines()]
    sample = range(0, 480, 16)  # 30 rows spread over the subjects
    for i in sample:
        gold, nxt = rows[i]["answer"], rows[i + 1]
        own = check(engine, rows[i]["solution"], gold)
        assert (own.status, own.score) == (Status.OK, 1.0), (i, own)
        assert own.details["extracted"] and own.details["gold_parsed"]
        other = check(engine, nxt["solution"], gold)
        assert (other.status, other.score) == (Status.OK, 0.0), (i, gold, nxt["answer"], other)


@pytest.mark.parametrize("reference", ["", "   ", r"\boxed{}", None, True, [], ["4", ""], {"answer": "4"}])
def test_unusable_gold_is_invalid_reference(engine: Engine, reference: Any) -> None:
    verdict = check(engine, r"\boxed{4}", reference)
    assert verdict.status is Status.INVALID_REFERENCE and verdict.score is None, verdict


@pytest.mark.parametrize("response", ["", "   ", "no mathematics in here at all"])
def test_nothing_extracted_is_no_answer(engine: Engine, response: str) -> None:
    verdict = check(engine, response, "5")
    assert (verdict.status, verdict.score) == (Status.NO_ANSWER, 0.0)
    assert verdict.details["gold_parsed"] == "5" and "extracted" not in verdict.details


@pytest.mark.parametrize(("response", "reference", "options", "score"), [
    (r"so $\boxed{\frac{12}{36}}$", r"\frac{1}{3}", {}, 1.0),
    (r"\boxed{4}", ["3", "4"], {}, 1.0),  # any gold of a list may match
    (r"\boxed{5}", ["3", "4"], {}, 0.0),
    ("27", 27.0, {}, 1.0),  # numbers are read through str()
    (r"The answer is $\boxed{\$32,\!348}$", r"\$32,\!348", {}, 1.0),  # \$ is a dollar sign, not a delimiter
    (r"$\frac{1}{2}$", r"\(\frac{1}{2}\)", {}, 1.0),  # a delimited gold is parsed as written
    ("$y+1$", "x+1", {}, 0.0),
    ("$y+1$", "x+1", {"strict": False}, 1.0),  # non-strict matches variables by position
    ("$0.33$", "1/3", {}, 0.0),
    ("$0.33$", "1/3", {"float_rounding": 2}, 1.0),
])
def test_verdicts_and_options(engine: Engine, response: str, reference: Any, options: dict, score: float) -> None:
    verdict = check(engine, response, reference, **options)
    assert (verdict.status, verdict.score) == (Status.OK, score), verdict


def test_an_exception_inside_math_verify_is_a_named_error(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    import math_verify

    def broken(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("comparison exploded")

    monkeypatch.setattr(math_verify, "verify", broken)
    verdict = check(engine, r"\boxed{4}", "4")
    assert verdict.status is Status.ERROR and verdict.score is None
    assert "RuntimeError" in verdict.reason and "comparison exploded" in verdict.reason


def test_timeout_disabled_warning_is_silenced(caplog: pytest.LogCaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import math_verify.grader
    import math_verify.parser

    from verifiers.kinds.math.math_verify_verifier import MathVerifyVerifier

    verifier = MathVerifyVerifier()
    for module in (math_verify.parser, math_verify.grader):
        monkeypatch.setattr(module, "TIMEOUT_WARNING_SHOWN", False)  # it warns once per process otherwise
    with caplog.at_level(logging.DEBUG, logger="math_verify"):
        verifier.check(r"\boxed{2}", "2", verifier.parse_options({}))
    assert not [r for r in caplog.records if "Timeout is disabled" in r.getMessage()]


def test_worker_pool_deadline_is_enforced() -> None:
    async def run() -> tuple[Verdict, float, list[Verdict], int]:
        pool = WorkerPool(1, [MODULE], memory_mb=2048)
        await pool.start()
        try:
            started = time.monotonic()
            stuck = await pool.run("math_verify", HANG, "5", {}, 2.0)
            elapsed = time.monotonic() - started
            after = [await pool.run("math_verify", r"\boxed{\frac{1}{2}}", "0.5", {}, 30.0) for _ in range(2)]
            return stuck, elapsed, after, pool.stats.restarts
        finally:
            await pool.close()

    stuck, elapsed, after, restarts = asyncio.run(run())
    assert stuck.status is Status.TIMEOUT and stuck.score is None, stuck
    assert elapsed < 10, elapsed  # the 2 s deadline, not Math-Verify's own (disabled) timeouts
    assert restarts == 1
    assert [(v.status, v.score) for v in after] == [(Status.OK, 1.0)] * 2  # the replacement worker serves


def test_math_verify_over_rest(server: LiveServer) -> None:
    cases = [
        ("right", r"so $\boxed{\frac{12}{36}}$", r"\frac{1}{3}", {}),
        ("wrong", r"$\boxed{7}$", "8", {}),
        ("none", "", "8", {}),
        ("badref", r"\boxed{5}", "", {}),
        ("loose", "$y+1$", "x+1", {"strict": False}),
        ("stuck", HANG, "5", {"timeout_s": 2}),
    ]
    items = [{"id": i, "verifier": "math_verify", "response": resp, "reference": ref, "options": opts}
             for i, resp, ref, opts in cases]
    with server.client() as c:
        r = c.post("/v1/verify", json={"items": items})
        assert r.status_code == 200, r.text
        by_id = {x["id"]: x for x in r.json()["results"]}
        bad = c.post("/v1/verify", json={"items": [{"verifier": "math_verify", "response": "1", "reference": "1",
                                                    "options": {"float_rounding": "lots"}}]})
        listed = {v["name"] for v in c.get("/v1/verifiers").json()["verifiers"]}
    expect = {"right": ("ok", 1.0), "wrong": ("ok", 0.0), "none": ("no_answer", 0.0),
              "badref": ("invalid_reference", None), "loose": ("ok", 1.0), "stuck": ("timeout", None)}
    assert {k: (v["status"], v["score"]) for k, v in by_id.items()} == expect
    assert by_id["right"]["details"] == {"gold_parsed": r"\frac{1}{3}", "extracted": r"\frac{12}{36}"}
    assert bad.status_code == 422 and "float_rounding" in bad.text
    assert "math_verify" in listed
    assert "Timeout is disabled" not in server.log()
