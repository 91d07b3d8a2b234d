"""Client-side coalescing and outage tolerance, against the real server.

Requests are counted where they arrive: the server's own ``reward_requests_total`` counter on /metrics.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from reward_client import RequestRejected, RetryPolicy, RewardClient, ServiceUnavailable, VerifyItem

from tests.support.live_restart import Restarter
from tests.support.server import LiveServer, free_port, requests_to


def test_256_concurrent_compute_score_async_calls_take_at_most_16_requests(
    verl_module,
    server: LiveServer,
) -> None:
    answers = [f"city {i}" for i in range(256)]

    async def step() -> list:
        return await asyncio.gather(*(
            verl_module.compute_score_async("capitals", a if i % 3 else "wrong", a, {"index": i})
            for i, a in enumerate(answers)
        ))

    before = requests_to(server.url)
    outs = asyncio.run(step())
    sent = requests_to(server.url) - before
    assert 1 <= sent <= 16, sent
    assert all(o["scored"] and o["status"] == "ok" for o in outs)
    assert [o["score"] for o in outs] == [1.0 if i % 3 else 0.0 for i in range(256)]


def test_sync_callers_in_threads_share_requests(server: LiveServer) -> None:
    """verl runs a sync compute_score in a thread pool: each thread blocks on its own sample."""
    with RewardClient(server.url, coalesce=True, coalesce_window_s=0.02) as client:
        before = requests_to(server.url)
        with ThreadPoolExecutor(max_workers=32) as pool:
            results = list(pool.map(lambda i: client.verify_one("exact_match", str(i), str(i % 7)), range(96)))
        sent = requests_to(server.url) - before
        stats = client.coalescer.stats()
    assert [r.score for r in results] == [1.0 if i == i % 7 else 0.0 for i in range(96)]
    assert sent == stats["verify_requests"] < 96  # several callers per request, and the count is the server's own


def test_coalescing_async_client_serves_any_event_loop(server: LiveServer) -> None:
    """A coalescing async client sends from its own loop thread, so it outlives the loops that call it."""
    from reward_client import AsyncRewardClient

    client = AsyncRewardClient(server.url, coalesce=True)

    async def step(k: int) -> list:
        return await asyncio.gather(*(client.verify_one("exact_match", str(i), str(i * k)) for i in range(40)))

    before = requests_to(server.url)
    first, second = asyncio.run(step(1)), asyncio.run(step(2))  # two loops, as TRL's or a user's steps may be
    assert [r.score for r in first] == [1.0] * 40 and [r.score for r in second] == [1.0] + [0.0] * 39
    assert requests_to(server.url) - before < 80
    asyncio.run(client.aclose())


def test_a_rejected_item_fails_only_its_caller(server: LiveServer) -> None:
    with RewardClient(server.url, coalesce=True, coalesce_window_s=0.05) as client:
        def call(i: int):
            items = [VerifyItem("exact_match", "a", "a"), VerifyItem("exact_match", "b", "a")]
            if i == 5:
                items.insert(1, VerifyItem("no_such_verifier", "a", "a"))
            try:
                return [r.score for r in client.verify(items)]
            except RequestRejected as exc:
                return exc

        with ThreadPoolExecutor(max_workers=10) as pool:
            outs = list(pool.map(call, range(10)))
    bad = outs[5]
    assert isinstance(bad, RequestRejected) and bad.status_code == 422 and bad.loc[:2] == ["items", 1]
    assert "no_such_verifier" in bad.message
    assert all(o == [1.0, 0.0] for i, o in enumerate(outs) if i != 5)


def test_none_padded_options_are_not_set(server: LiveServer) -> None:
    """What ``datasets`` makes of an options column whose rows have different keys; a set value is still checked."""
    with RewardClient(server.url) as client:
        padded = client.verify([
            {"verifier": "exact_match", "response": "PARIS", "reference": "paris",
             "options": {"ignore_case": None, "multiline": None, "timeout_s": None}},
            {"verifier": "exact_match", "response": "PARIS", "reference": "paris", "options": {"ignore_case": False}},
        ])
        assert [r.score for r in padded] == [1.0, 0.0]
        with pytest.raises(RequestRejected) as info:
            client.verify([{"verifier": "exact_match", "response": "a", "reference": "a",
                            "options": {"ignore_case": "sometimes", "other": None}}])
        assert info.value.status_code == 422 and info.value.loc[:2] == ["items", 0]
        with pytest.raises(RequestRejected):
            client.verify([{"verifier": "exact_match", "response": "a", "options": {"no_such_option": 1}}])


def test_budget_spent_is_a_clear_error() -> None:
    port = free_port()  # nothing listens here
    policy = RetryPolicy(budget_s=1.0, base_delay_s=0.05, max_delay_s=0.2)
    with RewardClient(f"http://127.0.0.1:{port}", retry=policy, coalesce=True) as client:
        with pytest.raises(ServiceUnavailable) as info:
            client.verify_one("exact_match", "a", "a")
    message = str(info.value)
    assert "ConnectError" in message and "retry budget 1 s spent" in message
    assert "REWARD_CLIENT_RETRY_BUDGET_S" in message
    assert info.value.attempts > 1


def test_default_client_rides_out_a_20_s_restart(tmp_path: Path) -> None:
    """Stop the real server, restart it on the same port 20 s later: calls made in between complete."""
    server = Restarter(tmp_path)
    live = server.start()
    try:
        sync_client = RewardClient(live.url)  # every setting at its default
        coalesced = RewardClient(live.url, coalesce=True)
        assert sync_client.verify_one("exact_match", "x", "x").score == 1.0  # a pooled keep-alive connection now
        server.stop()
        results: dict = {}

        def call(key: str, client: RewardClient) -> None:
            try:
                results[key] = client.scores("exact_match", ["a", "b"], ["a", "a"])
            except Exception as exc:
                results[key] = exc

        callers = [threading.Thread(target=call, args=(k, c))
                   for k, c in (("sync", sync_client), ("coalesced", coalesced))]
        for t in callers:
            t.start()
        threading.Event().wait(20.0)  # the outage
        assert not results, results  # still pending: nothing listened for 20 s
        server.start()
        for t in callers:
            t.join(timeout=300)
        assert results == {"sync": [1.0, 0.0], "coalesced": [1.0, 0.0]}
        sync_client.close()
        coalesced.close()
    finally:
        server.stop()
