"""Cheap checks on small inputs run inline (no worker hop); the verdicts must be the ones the pool gives."""
from __future__ import annotations

import asyncio

import pytest

from tests.support.server import LiveServer
from verifiers.engine import Engine
from verifiers.engine.pool import WorkerPool
from verifiers.engine.registry import BUILTIN_MODULES, build_registry
from verifiers.types import VerifyItem

CASES = [
    VerifyItem("exact_match", " Paris ", "paris"),
    VerifyItem("exact_match", "Lyon", "paris"),
    VerifyItem("exact_match", "", "paris"),
    VerifyItem("multiple_choice", "Final answer: (C)", "C"),
    VerifyItem("multiple_choice", "answer: A. The answer is B", "B"),
    VerifyItem("format", "<think>x</think> 4", None, {"template": "think"}),
    VerifyItem("length", "a b c d", None, {"mode": "linear", "max_length": 8, "unit": "words"}),
    VerifyItem("repetition", "a b a b a b", None, {"n": 2}),
]


def padded(item: VerifyItem) -> VerifyItem:
    """The same check pushed over the inline size limit, so it must go through the worker pool."""
    filler = "\n" + " " * 25_000
    response = item.response + filler if item.verifier != "length" else item.response
    return VerifyItem(item.verifier, response, item.reference, dict(item.options))


def test_inline_and_pool_agree() -> None:
    async def run() -> None:
        registry = build_registry()
        pool = WorkerPool(1, list(BUILTIN_MODULES))
        await pool.start()
        try:
            engine = Engine(registry, pool=pool)
            for item in CASES:
                p = engine.prepare(item)
                assert engine._runs_inline(p), item
            inline = await engine.verify_many(CASES)
            pooled_items = [padded(i) for i in CASES if i.verifier not in ("length",)]
            for it in pooled_items:
                assert not engine._runs_inline(engine.prepare(it))
            pooled = await engine.verify_many(pooled_items)
            inline_cmp = [v for i, v in zip(CASES, inline) if i.verifier != "length"]
            for a, b, item in zip(inline_cmp, pooled, pooled_items):
                assert (a.status, a.score) == (b.status, b.score), item
            assert [v.score for v in inline] == [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, -0.5, pytest.approx(-0.6)]
            assert inline[4].status.value == "rejected"
        finally:
            await pool.close()

    asyncio.run(run())


def test_user_patterns_never_run_inline() -> None:
    engine = Engine(build_registry())
    assert not engine._runs_inline(engine.prepare(VerifyItem("regex", "aaa", "(a+)+$")))
    assert not engine._runs_inline(engine.prepare(VerifyItem("format", "x", None, {"regex": "(a+)+$"})))
    assert not engine._runs_inline(engine.prepare(VerifyItem("math", "4", "4")))


def test_blank_line_flood_gets_a_verdict(server: LiveServer) -> None:
    """A response of 200k blank lines must not make the choice patterns backtrack past the deadline."""
    with server.client() as c:
        r = c.post("/v1/verify", json={"items": [
            {"verifier": "multiple_choice", "response": "\n" * 200_000 + "B", "reference": "B",
             "options": {"timeout_s": 5}}]})
    result = r.json()["results"][0]
    assert result["status"] == "ok" and result["score"] == 1.0, result
