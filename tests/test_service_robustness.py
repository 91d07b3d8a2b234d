"""Hostile input that once wedged the service: deeply nested references (the pool retried an unpicklable job
forever) and lone surrogates. Each case is followed by a normal request that must be served at once."""
from __future__ import annotations

import asyncio
import json

import pytest

from tests.conftest import LiveServer
from verifiers.pool import WorkerPool
from verifiers.types import Status

NORMAL = {"verifier": "math", "response": "The answer is $\\boxed{42}$.", "reference": "42"}


def nested(depth: int) -> object:
    value: object = "42"
    for _ in range(depth):
        value = [value]
    return value


def nested_json(depth: int) -> str:
    """The JSON text of ``nested(depth)``, written out (json.dumps itself recurses)."""
    return "[" * depth + '"42"' + "]" * depth


def post(server: LiveServer, path: str, body: object) -> tuple[int, dict]:
    text = json.dumps(body) if not isinstance(body, str) else body
    with server.client(timeout=30) as c:
        r = c.post(path, content=text, headers={"content-type": "application/json"})
    return r.status_code, r.json()


@pytest.mark.parametrize("depth", [65, 300, 2000])
def test_deep_references_are_refused_and_service_goes_on(server: LiveServer, depth: int) -> None:
    item = json.dumps({**NORMAL, "reference": None}).replace("null", nested_json(depth))
    code, body = post(server, "/v1/verify", f'{{"items": [{item}]}}')
    assert code in (400, 422), body
    assert code != 500
    code, body = post(server, "/v1/verify", {"items": [NORMAL, NORMAL]})
    assert code == 200 and [r["score"] for r in body["results"]] == [1.0, 1.0]


def test_nesting_at_the_limit_is_scored_as_an_unusable_reference(server: LiveServer) -> None:
    code, body = post(server, "/v1/verify", {"items": [{**NORMAL, "reference": nested(63)}, NORMAL]})
    assert code == 200, body
    assert body["results"][0]["status"] == "invalid_reference" and body["results"][1]["score"] == 1.0


def test_deep_openrlhf_labels_are_refused_and_service_goes_on(server: LiveServer) -> None:
    query = "Q: what is 6*7?\nA: The answer is $\\boxed{42}$."
    for depth in (100, 1500):
        text = json.dumps({"query": [query], "labels": [None]}).replace("null", nested_json(depth))
        code, body = post(server, "/openrlhf/reward", text)
        assert code in (400, 422), body
    code, body = post(server, "/openrlhf/reward", {"query": [query], "labels": ["42"]})
    assert code == 200 and body["rewards"] == [1.0]


def test_an_unpicklable_job_is_answered_with_an_error_and_the_pool_keeps_serving() -> None:
    """Library use has no edge to refuse the input: the pool itself must not re-queue a job it can never send."""
    async def main() -> list:
        pool = WorkerPool(1, ["verifiers.math.verifier"])
        await pool.start()
        try:
            bad, good = await asyncio.gather(
                pool.run("math", "The answer is 42.", nested(5000), {}, 10.0),
                pool.run("math", "The answer is 42.", "42", {}, 10.0),
            )
            after = await asyncio.wait_for(pool.run("math", "The answer is 7.", "7", {}, 10.0), 20)
            return [bad, good, after]
        finally:
            await pool.close()

    bad, good, after = asyncio.run(main())
    assert bad.status is Status.ERROR and "cannot be sent" in bad.reason
    assert good.score == 1.0 and after.score == 1.0
