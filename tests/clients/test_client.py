"""The thin client over real sockets: against the real service, and against a scripted server for retries."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from reward_client import (
    AsyncRewardClient,
    RequestRejected,
    RetryPolicy,
    RewardClient,
    ServiceUnavailable,
    VerifyItem,
)
from reward_client.retry import parse_retry_after

from tests.support.client import FAST, calls, script
from tests.support.server import ROOT, LiveServer, free_port

# --- against the real service ---

def test_verify_keeps_order_across_chunks_and_null_stays_null(server: LiveServer) -> None:
    items = []
    for i in range(23):
        items.append(VerifyItem("exact_match", f"answer {i}", f"answer {i if i % 2 else i + 1}", id=f"r{i}"))
    items.insert(5, VerifyItem("test_down", "x", id="down"))
    items.insert(11, {"verifier": "regex", "response": "abc", "reference": "(unclosed", "id": "badref"})
    with RewardClient(server.url, chunk_size=4) as client:
        results = client.verify(items)
    assert [r.id for r in results] == [i.id if isinstance(i, VerifyItem) else i["id"] for i in items]
    by_id = {r.id: r for r in results}
    assert (by_id["down"].score, by_id["down"].status, by_id["down"].scored) == (None, "unavailable", False)
    assert (by_id["badref"].score, by_id["badref"].status) == (None, "invalid_reference")
    for i in range(23):
        assert by_id[f"r{i}"].score == (1.0 if i % 2 else 0.0)
        assert by_id[f"r{i}"].status == "ok" and by_id[f"r{i}"].verifier == "exact_match"


def test_bad_input_raises_with_the_servers_message_and_the_callers_index(server: LiveServer) -> None:
    items = [VerifyItem("exact_match", "a", "a") for _ in range(7)] + [VerifyItem("no_such_verifier", "a", "a")]
    with RewardClient(server.url, chunk_size=3) as client:
        with pytest.raises(RequestRejected) as info:
            client.verify(items)
    assert info.value.status_code == 422
    assert "no_such_verifier" in info.value.message
    assert info.value.loc[:2] == ["items", 7]  # chunk 3, position 1 → the caller's item 7
    assert "items[7]" in str(info.value)


def test_async_client_concurrent_chunks_and_scores(server: LiveServer) -> None:
    responses = [str(i) for i in range(40)]
    references = [str(i if i % 3 else -i) for i in range(40)]

    async def go() -> list:
        async with AsyncRewardClient(server.url, chunk_size=6, max_concurrency=3) as client:
            scores = await client.scores("exact_match", responses, references)
            one = await client.verify_one("test_down", "x")
            return [scores, one]

    scores, one = asyncio.run(go())
    assert scores == [1.0 if i % 3 or i == 0 else 0.0 for i in range(40)]
    assert one.score is None and one.status == "unavailable"


def test_bearer_token(tmp_path) -> None:
    from tests.support.server import run_server

    with run_server(tmp_path, {"REWARD_SERVICE_AUTH_TOKEN": "s3cret"}) as live:
        with RewardClient(live.url, token="s3cret") as client:
            assert client.verify_one("exact_match", "x", "x").score == 1.0
        with RewardClient(live.url, token="wrong", retry=FAST) as client:
            with pytest.raises(RequestRejected) as info:
                client.verify_one("exact_match", "x", "x")
        assert info.value.status_code == 401


# --- retries, against the scripted server ---

def test_retries_429_and_503_honouring_retry_after(scripted: str) -> None:
    script(scripted, [{"status": 429, "retry_after": "1"}, {"status": 503, "retry_after": "1"},
                      {"status": 429}])
    started = time.monotonic()
    with RewardClient(scripted, retry=FAST) as client:
        result = client.verify_one("exact_match", "Paris", "paris")
    assert result.score == 1.0
    log = calls(scripted)
    assert len(log) == 4
    # The two answers carrying Retry-After: 1 were each followed by at least a second of quiet.
    assert log[1]["t"] - log[0]["t"] >= 1.0 and log[2]["t"] - log[1]["t"] >= 1.0
    assert time.monotonic() - started >= 2.0


def test_retry_after_http_date_is_honoured(scripted: str) -> None:
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 2))
    assert 0.5 < parse_retry_after(date) <= 2.0
    script(scripted, [{"status": 503, "retry_after": date}])
    with RewardClient(scripted, retry=FAST) as client:
        assert client.verify_one("exact_match", "a", "a").score == 1.0
    log = calls(scripted)
    assert len(log) == 2 and log[1]["t"] - log[0]["t"] >= 0.5


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_are_never_retried(scripted: str, status: int) -> None:
    script(scripted, [{"status": status, "detail": f"scripted {status} problem"}] * 3)
    with RewardClient(scripted, retry=FAST) as client:
        with pytest.raises(RequestRejected) as info:
            client.verify_one("exact_match", "a", "a")
    assert info.value.status_code == status and info.value.message == f"scripted {status} problem"
    assert len(calls(scripted)) == 1


def test_gives_up_after_the_attempt_budget(scripted: str) -> None:
    script(scripted, [{"status": 503}] * 10)
    with RewardClient(scripted, retry=RetryPolicy(attempts=3, base_delay_s=0.01)) as client:
        with pytest.raises(ServiceUnavailable) as info:
            client.verify_one("exact_match", "a", "a")
    assert info.value.attempts == 3 and info.value.status_code == 503
    assert len(calls(scripted)) == 3


def test_async_client_retries_too(scripted: str) -> None:
    script(scripted, [{"status": 429, "retry_after": "1"}, {"status": 502}])

    async def go() -> list:
        async with AsyncRewardClient(scripted, retry=FAST) as client:
            return await client.verify([VerifyItem("exact_match", "a", "a"), VerifyItem("exact_match", "a", "b")])

    results = asyncio.run(go())
    assert [r.score for r in results] == [1.0, 0.0]
    log = calls(scripted)
    assert len(log) == 3 and log[1]["t"] - log[0]["t"] >= 1.0


def test_connection_refused_is_retried_then_named() -> None:
    port = free_port()  # nothing listens here
    with RewardClient(f"http://127.0.0.1:{port}", retry=RetryPolicy(attempts=3, base_delay_s=0.01)) as client:
        with pytest.raises(ServiceUnavailable) as info:
            client.verify_one("exact_match", "a", "a")
    assert info.value.attempts == 3 and "ConnectError" in str(info.value)


def test_connection_refused_then_server_comes_up(tmp_path) -> None:
    """A trainer started before the service (first_contact_s raised, as trainer_policy does): the client keeps trying
    until the server answers."""
    port = free_port()
    proc = None

    def start_later() -> None:
        nonlocal proc
        time.sleep(1.0)
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "tests.support.scripted_app:app", "--port", str(port),
             "--log-level", "warning"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    import threading

    starter = threading.Thread(target=start_later)
    starter.start()
    try:
        policy = RetryPolicy(attempts=40, base_delay_s=0.2, max_delay_s=0.5, first_contact_s=None)
        with RewardClient(f"http://127.0.0.1:{port}", retry=policy) as client:
            assert client.verify_one("exact_match", "a", "a").score == 1.0
    finally:
        starter.join()
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)


def test_batch_too_large_for_the_server_is_split_in_order(scripted: str) -> None:
    script(scripted, [], max_items=5)
    items = [VerifyItem("exact_match", str(i), str(i if i % 4 else "x"), id=str(i)) for i in range(23)]
    with RewardClient(scripted, chunk_size=16, retry=FAST) as client:
        results = client.verify(items)
    assert [r.id for r in results] == [str(i) for i in range(23)]
    assert [r.score for r in results] == [0.0 if i % 4 == 0 else 1.0 for i in range(23)]
    assert max(c["n"] for c in calls(scripted)) == 16 and all(c["n"] <= 16 for c in calls(scripted))
    assert sum(c["n"] for c in calls(scripted) if c["n"] <= 5) == 23


def test_retry_delay_policy() -> None:
    import random

    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    rng = random.Random(7)
    for attempt in range(1, 10):
        d = policy.delay(attempt, rng=rng)
        assert 0 <= d <= min(4.0, 0.5 * 2 ** (attempt - 1))
    waits = {round(policy.delay(3, rng=rng), 6) for _ in range(20)}
    assert len(waits) > 10  # jittered, so clients that failed together do not return together
    assert all(policy.delay(1, retry_after=3.0, rng=rng) >= 3.0 for _ in range(20))
    assert policy.delay(1, retry_after=10_000, rng=rng) <= policy.max_retry_after_s * 1.25
    assert parse_retry_after("garbage") is None and parse_retry_after("2") == 2.0


# --- the other endpoints ---

def test_sandbox_run_and_batch_through_the_client(server: LiveServer) -> None:
    from reward_client import SandboxRun

    with RewardClient(server.url, chunk_size=2) as client:
        one = client.sandbox_run("import sys\nprint(sys.stdin.read().upper(), sys.argv[1:])", stdin="hey",
                                 args=["-x"])
        assert one.status == "ok" and one.passed and one.stdout.strip() == "HEY ['-x']" and one.exit_code == 0
        runs = [SandboxRun("print('a')", id="ok"), SandboxRun("raise SystemExit(4)", id="crash"),
                SandboxRun("import time\ntime.sleep(9)", id="slow", limits={"wall_s": 0.5}),
                {"id": "file", "code": "print(open('data.txt').read())", "files": {"data.txt": "42"}},
                SandboxRun("print(1)", id="late")]
        results = client.sandbox_run_many(runs)
        assert [r.id for r in results] == ["ok", "crash", "slow", "file", "late"]
        assert [r.status for r in results] == ["ok", "runtime_error", "timeout", "ok", "ok"]
        assert results[1].exit_code == 4 and results[3].stdout.strip() == "42"
        with pytest.raises(RequestRejected) as info:
            client.sandbox_run_many([SandboxRun("1")] * 3 + [SandboxRun("1", language="cobol-77")])
        assert info.value.status_code == 422 and info.value.loc == ["items", 3, "language"]

    async def go() -> list:
        async with AsyncRewardClient(server.url, chunk_size=2) as client:
            return await client.sandbox_run_many([SandboxRun(f"print({i} * 2)") for i in range(5)])

    assert [r.stdout.strip() for r in asyncio.run(go())] == [str(i * 2) for i in range(5)]


@pytest.fixture(scope="module")
def prm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.support.reward_models import build_model, model_env
    from tests.support.server import run_server

    root = tmp_path_factory.mktemp("client_prm")
    spec = {"name": "tiny-prm", "path": str(build_model(root / "prm", "token_classification", seed=5)),
            "format": "separator"}
    with run_server(root, model_env([spec])) as live:
        yield live


def test_prm_score_through_the_client_matches_one_plain_request(prm_server: LiveServer) -> None:
    from reward_client import PrmItem

    items = [PrmItem("How many clips?", steps=["48 / 2 = 24.", "48 + 24 = 72.", "Answer: 72."], id="a"),
             PrmItem("Solve 3x + 5 = 20.", response="3x = 15\n\nx = 5", id="b"),
             {"id": "c", "prompt": "2+2?", "steps": ["2+2=5"]},
             PrmItem("p", response="   ", id="empty"),
             PrmItem("Add.", steps=["1+1=2", "2+1=3"], id="e")]
    with prm_server.client() as c:
        raw = c.post("/v1/prm/score", json={"model": "tiny-prm", "aggregation": "mean", "threshold": 0.4, "items": [
            {k: v for k, v in vars(i).items() if v is not None} if isinstance(i, PrmItem) else i for i in items
        ]}).json()["results"]
    with RewardClient(prm_server.url, chunk_size=2) as client:
        got = client.prm_score("tiny-prm", items, aggregation="mean", threshold=0.4)
    assert [r.id for r in got] == ["a", "b", "c", "empty", "e"]
    for mine, plain in zip(got, raw):
        assert mine.step_scores == pytest.approx(plain["step_scores"], abs=1e-5)
        assert mine.first_error == plain["first_error"] and mine.status == plain["status"]
        assert (mine.score is None) == (plain["score"] is None)
        if mine.score is not None:
            assert mine.score == pytest.approx(plain["score"], abs=1e-5)
    assert len(got[0].step_scores) == 3 and got[3].status == "no_answer"
    with RewardClient(prm_server.url) as client:
        with pytest.raises(RequestRejected) as info:
            client.prm_score("no-such-model", items[:1])
    assert info.value.status_code == 422 and "no-such-model" in info.value.message
