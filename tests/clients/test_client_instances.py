"""One client over several instances of the service: real servers on loopback, one of them killed mid-run.

Every item must be answered once and in the caller's order, both instances must do part of the work (counted by
the servers themselves, in their /metrics), a killed instance's chunks must land on the survivor, a restarted one
must be probed back in, a GRPO group must be scored whole by one instance, and with every instance down the client
must raise a named error instead of returning scores.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from reward_client import AsyncRewardClient, RetryPolicy, RewardClient, ServiceUnavailable, ServiceUnreachable
from reward_client.protocol import ClientConfig, split_urls

from tests.support.live_restart import Restarter
from tests.support.server import free_port

QUICK = RetryPolicy(budget_s=60.0, base_delay_s=0.05, max_delay_s=0.5, first_contact_s=5.0)


def items(n: int, tag: str = "") -> list[dict[str, Any]]:
    """exact_match items whose verdicts alternate 1/0 in a pattern tied to the index, so order is checked too."""
    return [{"verifier": "exact_match", "id": f"{tag}{k}", "response": str(k),
             "reference": str(k) if k % 3 else str(k + 1)} for k in range(n)]


def assert_answered_once_in_order(sent: list[dict[str, Any]], results: list[Any]) -> None:
    assert len(results) == len(sent)
    assert [r.id for r in results] == [i["id"] for i in sent]
    assert [r.score for r in results] == [1.0 if k % 3 else 0.0 for k in range(len(sent))]


def items_counted(url: str) -> float:
    """Items this server verified since it started, from its own Prometheus counter."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("reward_items_total{"))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Restarter]]:
    root = tmp_path_factory.mktemp("instances")
    servers = [Restarter(root / name) for name in ("a", "b")]
    for s in servers:
        s.start()
    try:
        yield servers
    finally:
        for s in servers:
            s.stop()


def up(server: Restarter) -> Restarter:
    """The server, started again if an earlier test left it down."""
    try:
        if httpx.get(f"{server.url}/readyz", timeout=2).status_code == 200:
            return server
    except httpx.TransportError:
        pass
    server.stop()
    server.start()
    return server


def kill(server: Restarter) -> None:
    """SIGKILL the server's process (no drain, connections cut), then reap it."""
    live = server.live
    assert live is not None
    os.kill(live.proc.pid, signal.SIGKILL)
    live.proc.wait(timeout=30)
    server.stop()


# --- URL lists ---

def test_urls_come_as_a_list_or_a_comma_separated_string(monkeypatch: pytest.MonkeyPatch) -> None:
    assert split_urls("http://a:1/, http://b:2,,http://a:1") == ["http://a:1", "http://b:2"]
    assert split_urls(["http://a:1", "http://b:2/,http://c:3"]) == ["http://a:1", "http://b:2", "http://c:3"]
    assert split_urls(None) == split_urls("") == split_urls([]) == []
    monkeypatch.setenv("REWARD_CLIENT_URL", "http://a:1,http://b:2")
    assert ClientConfig().urls == ["http://a:1", "http://b:2"]
    assert ClientConfig("http://c:3").urls == ["http://c:3"]
    with pytest.raises(ValueError, match="'localhost:8001'"):
        AsyncRewardClient("http://127.0.0.1:8000,localhost:8001")
    with pytest.raises(ValueError, match="'ftp://b'"):
        RewardClient(["http://a", "ftp://b"])
    with pytest.raises(ValueError, match="custom transport"):
        RewardClient(["http://a:1", "http://b:2"], transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    omegaconf = pytest.importorskip("omegaconf")  # verl hands reward_kwargs over as OmegaConf containers
    assert split_urls(omegaconf.OmegaConf.create(["http://a:1", "http://b:2"])) == ["http://a:1", "http://b:2"]


# --- a slow instance answering after its chunk was sent elsewhere ---

def test_a_chunk_resent_after_its_instance_left_is_answered_once() -> None:
    """B holds chunk 0 without answering; B's refusal of chunk 1 takes it out of the rotation, so chunk 0 is sent to
    A as well. A's answer wins; B's late answer (a different score) must not appear anywhere."""
    release = asyncio.Event()
    seen: dict[str, list[str]] = {"a": [], "b": []}

    async def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if request.url.path == "/readyz":
            return httpx.Response(503)  # B stays out for the rest of the test
        ids = [i["id"] for i in json.loads(request.content)["items"]]
        seen[host].append(",".join(ids))
        if host == "b" and len(seen["b"]) == 1:
            await release.wait()  # the slow answer, released only after the call returned
            return httpx.Response(200, json={"results": [{"id": i, "score": 0.5, "status": "ok"} for i in ids]})
        if host == "b":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"results": [{"id": i, "score": 1.0, "status": "ok"} for i in ids]})

    async def go() -> tuple[list[Any], list[dict[str, Any]]]:
        transport = httpx.MockTransport(handler)
        async with AsyncRewardClient(["http://a", "http://b"], transport=transport, chunk_size=2,
                                     max_concurrency=2, retry=QUICK) as client:
            # chunks in turn: 0 -> a, 1 -> b (held), 2 -> a, 3 -> b (refused: b leaves, chunk 1 goes to a too)
            results = await asyncio.wait_for(client.verify(items(8)), timeout=30)
            release.set()
            await asyncio.sleep(0.05)
            return results, client.instance_stats()

    results, stats = asyncio.run(go())
    assert [r.id for r in results] == [str(k) for k in range(8)]
    assert all(r.score == 1.0 for r in results)  # every chunk answered by A; B's 0.5 dropped
    assert seen["b"] == ["2,3", "6,7"]
    assert sorted(seen["a"]) == ["0,1", "2,3", "4,5", "6,7"]  # chunk 1 really went to both
    b = next(s for s in stats if s["url"] == "http://b")
    assert b["down"] and b["failures"] == 1 and b["resent"] >= 1


def test_a_busy_instance_is_skipped_for_its_retry_after_and_a_gateway_error_takes_one_out() -> None:
    """429 + Retry-After: the chunk goes elsewhere at once (not after 60 s) and the busy instance stays in the
    rotation; 502 (a proxy with nothing behind it): the instance leaves the rotation."""
    calls: dict[str, int] = {"a": 0, "busy": 0, "gw": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if request.url.path == "/readyz":
            return httpx.Response(503)
        calls[host] += 1
        if host == "busy":
            return httpx.Response(429, headers={"retry-after": "60"}, json={"detail": "full"})
        if host == "gw":
            return httpx.Response(502, text="bad gateway")
        ids = [i["id"] for i in json.loads(request.content)["items"]]
        return httpx.Response(200, json={"results": [{"id": i, "score": 1.0, "status": "ok"} for i in ids]})

    async def go() -> tuple[list[Any], list[dict[str, Any]]]:
        async with AsyncRewardClient(["http://busy", "http://gw", "http://a"], transport=httpx.MockTransport(handler),
                                     chunk_size=10, max_concurrency=2, retry=QUICK) as client:
            results = await asyncio.wait_for(client.verify(items(100)), timeout=30)
            return results, client.instance_stats()

    results, stats = asyncio.run(go())
    assert [r.id for r in results] == [str(k) for k in range(100)] and all(r.score == 1.0 for r in results)
    busy, gw, a = stats
    assert calls["busy"] <= 2 and not busy["down"] and busy["items"] == 0  # tried once per slot, then left alone
    assert gw["down"] and gw["failures"] == 1 and calls["gw"] <= 2
    assert a["items"] == 100


def test_a_url_that_never_answers_does_not_fail_calls_the_others_can_take() -> None:
    """A wrong URL in the list (nothing listening) leaves the rotation on its first refusal; the calls succeed."""

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "nowhere":
            raise httpx.ConnectError("connection refused", request=request)
        ids = [i["id"] for i in json.loads(request.content)["items"]]
        return httpx.Response(200, json={"results": [{"id": i, "score": 1.0, "status": "ok"} for i in ids]})

    async def go() -> tuple[list[Any], list[dict[str, Any]]]:
        never = RetryPolicy(budget_s=5.0, first_contact_s=0.0, base_delay_s=0.05)
        async with AsyncRewardClient(["http://nowhere", "http://a"], transport=httpx.MockTransport(handler),
                                     chunk_size=10, retry=never) as client:
            return await asyncio.wait_for(client.verify(items(100)), timeout=30), client.instance_stats()

    results, (nowhere, a) = asyncio.run(go())
    assert [r.id for r in results] == [str(k) for k in range(100)]
    assert nowhere["down"] and nowhere["items"] == 0 and a["items"] == 100


def test_a_chunk_goes_to_the_instance_that_frees_a_slot_first() -> None:
    """Instances are chosen when a chunk can start, not when it is cut: a slow instance gets few chunks, a fast one
    the rest (chosen up front, each would get half and the call would wait on the slow one's queue)."""

    async def handler(request: httpx.Request) -> httpx.Response:
        ids = [i["id"] for i in json.loads(request.content)["items"]]
        if request.url.host == "slow":
            await asyncio.sleep(0.5)
        return httpx.Response(200, json={"results": [{"id": i, "score": 1.0, "status": "ok"} for i in ids]})

    async def go() -> tuple[list[Any], list[dict[str, Any]]]:
        async with AsyncRewardClient(["http://fast", "http://slow"], transport=httpx.MockTransport(handler),
                                     chunk_size=10, max_concurrency=1, retry=QUICK) as client:
            return await client.verify(items(400)), client.instance_stats()

    results, stats = asyncio.run(go())
    assert [r.id for r in results] == [str(k) for k in range(400)]
    fast, slow = (s["items"] for s in stats)
    assert fast + slow == 400 and slow <= 100, stats


# --- real servers ---

def test_async_client_spreads_4000_items_over_two_instances(pair: list[Restarter]) -> None:
    a, b = (up(s) for s in pair)
    before = [items_counted(s.url) for s in (a, b)]
    sent = items(4000)

    async def go() -> list[Any]:
        async with AsyncRewardClient([a.url, b.url], chunk_size=100, retry=QUICK) as client:
            out = await client.verify(sent)
            assert sum(s["items"] for s in client.instance_stats()) == 4000
            return out

    assert_answered_once_in_order(sent, asyncio.run(go()))
    done = [items_counted(s.url) - n for s, n in zip((a, b), before)]
    assert sum(done) == 4000  # each item verified exactly once, over both servers
    assert min(done) >= 400, done  # both did a real share


def test_sync_client_given_a_comma_separated_string_spreads_too(pair: list[Restarter]) -> None:
    a, b = (up(s) for s in pair)
    before = [items_counted(s.url) for s in (a, b)]
    sent = items(4000, "s")
    with RewardClient(f"{a.url},{b.url}", chunk_size=100, retry=QUICK) as client:
        assert client.ready()
        assert "exact_match" in {v["name"] for v in client.verifiers()}  # calls other than verify go through too
        assert_answered_once_in_order(sent, client.verify(sent))
        assert [s["url"] for s in client.instance_stats()] == [a.url, b.url]
    done = [items_counted(s.url) - n for s, n in zip((a, b), before)]
    assert sum(done) == 4000 and min(done) >= 400, done


def _stop_mid_run(b: Restarter, run: Any, stats: Any, stop: Any = None) -> list[Any]:
    """Start ``run`` (20,000 items) in a thread, stop ``b`` (``stop``, else SIGKILL) once it has answered part of
    them, wait for the end."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["results"] = run()
        except BaseException as exc:  # re-raised in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and thread.is_alive():
        counts = {s["url"]: s["items"] for s in stats()}
        if counts.get(b.url, 0) >= 1500:
            break
        time.sleep(0.02)
    assert thread.is_alive(), "the run ended before the kill: make it longer"
    (stop or kill)(b)
    thread.join(timeout=600)
    assert not thread.is_alive()
    if "error" in out:
        raise out["error"]
    return list(out["results"])


def test_async_client_loses_nothing_when_an_instance_is_killed_mid_run(pair: list[Restarter]) -> None:
    a, b = (up(s) for s in pair)
    sent = items(20_000, "k")
    loop = asyncio.new_event_loop()
    client = AsyncRewardClient([a.url, b.url], chunk_size=100, retry=QUICK)
    try:
        results = _stop_mid_run(b, lambda: loop.run_until_complete(client.verify(sent)), client.instance_stats)
        assert_answered_once_in_order(sent, results)
        stats = {s["url"]: s for s in client.instance_stats()}
        assert stats[b.url]["down"] and stats[b.url]["failures"] == 1
        assert stats[a.url]["items"] + stats[b.url]["items"] == 20_000  # each chunk answered once
        assert 1500 <= stats[b.url]["items"] < 20_000

        # restarted on its port, it is probed back in and takes work again
        b.start()
        before = items_counted(b.url)
        deadline = time.monotonic() + 60
        while client.instance_stats()[1]["down"] and time.monotonic() < deadline:
            loop.run_until_complete(asyncio.sleep(0.1))
        assert not client.instance_stats()[1]["down"], "the restarted instance was not probed back in"
        again = items(2000, "r")
        assert_answered_once_in_order(again, loop.run_until_complete(client.verify(again)))
        assert items_counted(b.url) - before >= 200
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


def test_sync_client_loses_nothing_when_an_instance_is_killed_mid_run(pair: list[Restarter]) -> None:
    a, b = (up(s) for s in pair)
    sent = items(20_000, "q")
    with RewardClient([a.url, b.url], chunk_size=100, retry=QUICK) as client:
        results = _stop_mid_run(b, lambda: client.verify(sent), client.instance_stats)
        assert_answered_once_in_order(sent, results)
        stats = {s["url"]: s for s in client.instance_stats()}
        assert stats[b.url]["down"] and stats[a.url]["items"] + stats[b.url]["items"] == 20_000


def test_a_hung_instance_is_noticed_by_the_watchdog_and_its_chunks_answered_elsewhere(
        pair: list[Restarter], monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGSTOP: connections are still accepted, nothing answers. The chunks held there must be re-sent well before
    the request timeout (120 s here), and the instance must rejoin once it runs again."""
    a, b = (up(s) for s in pair)
    monkeypatch.setenv("REWARD_CLIENT_STALL_S", "1")
    assert b.live is not None
    pid = b.live.proc.pid
    sent = items(20_000, "h")
    loop = asyncio.new_event_loop()
    client = AsyncRewardClient([a.url, b.url], chunk_size=100, retry=QUICK, timeout=120.0)

    def freeze(server: Restarter) -> None:
        os.kill(pid, signal.SIGSTOP)

    try:
        started = time.monotonic()
        results = _stop_mid_run(b, lambda: loop.run_until_complete(client.verify(sent)), client.instance_stats,
                                freeze)
        assert time.monotonic() - started < 100  # not a request timeout
        assert_answered_once_in_order(sent, results)
        stats = {s["url"]: s for s in client.instance_stats()}
        assert stats[b.url]["down"] and stats[b.url]["resent"] >= 1
        assert stats[a.url]["items"] + stats[b.url]["items"] == 20_000
    finally:
        os.kill(pid, signal.SIGCONT)
    try:
        deadline = time.monotonic() + 60
        while client.instance_stats()[1]["down"] and time.monotonic() < deadline:
            loop.run_until_complete(asyncio.sleep(0.1))
        assert not client.instance_stats()[1]["down"], "the instance running again was not probed back in"
        before = client.instance_stats()[1]["items"]
        again = items(2000, "c")
        assert_answered_once_in_order(again, loop.run_until_complete(client.verify(again)))
        assert client.instance_stats()[1]["items"] - before >= 200
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


def test_groups_stay_whole_on_one_instance(pair: list[Restarter]) -> None:
    """consensus scores a group within one request: split across instances it would become two smaller groups."""
    a, b = (up(s) for s in pair)
    answers = {f"p{g}": [str(g), str(g), f"\\boxed{{{g}}}", str(g + 1), str(g + 2)] for g in range(12)}
    sent = [{"verifier": "consensus", "response": f"The answer is {v}.", "id": f"{p}-{k}", "group": p}
            for p, values in answers.items() for k, v in enumerate(values)]
    expected = [1.0, 1.0, 1.0, 0.0, 0.0] * len(answers)

    async def go() -> list[Any]:
        async with AsyncRewardClient([a.url, b.url], chunk_size=3, max_concurrency=2, retry=QUICK) as client:
            out = await client.verify(sent)
            assert all(s["items"] > 0 for s in client.instance_stats())  # both instances scored groups
            return out

    results = asyncio.run(go())
    assert [r.id for r in results] == [i["id"] for i in sent]
    assert [r.score for r in results] == expected
    assert all(r.details["group_size"] == 5 for r in results)
    with RewardClient([a.url, b.url], chunk_size=3, retry=QUICK) as client:
        assert [r.score for r in client.verify(sent)] == expected


def test_every_instance_down_raises_a_named_error_never_a_score(pair: list[Restarter]) -> None:
    never = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    quick = RetryPolicy(budget_s=3.0, base_delay_s=0.05, max_delay_s=0.2, first_contact_s=1.0)
    with RewardClient(never, retry=quick) as client, pytest.raises(ServiceUnreachable) as caught:
        client.verify(items(10))
    assert all(url in str(caught.value) for url in never)

    # both reached, then both killed: the outage budget runs out with ServiceUnavailable naming both
    a, b = (up(s) for s in pair)

    async def go() -> None:
        async with AsyncRewardClient([a.url, b.url], retry=quick) as client:
            assert_answered_once_in_order(items(10), await client.verify(items(10)))
            kill(a)
            kill(b)
            started = time.monotonic()
            with pytest.raises(ServiceUnavailable) as lost:
                await client.verify(items(10))
            assert time.monotonic() - started < 30
            assert not isinstance(lost.value, ServiceUnreachable)
            assert a.url in str(lost.value) and b.url in str(lost.value)

    asyncio.run(go())



def test_every_trainer_adapter_takes_the_list(pair: list[Restarter], monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL (``url=`` as a list, and ``REWARD_CLIENT_URL``), verl (``reward_service_url`` with commas) and OpenRLHF
    (``REWARD_CLIENT_URL``) spread their work over both instances."""
    from reward_client import openrlhf, verl
    from reward_client.trl import make_async_reward_func, make_reward_func

    a, b = (up(s) for s in pair)
    urls = f"{a.url},{b.url}"
    n = 600
    completions = [str(k) for k in range(n)]
    answers = [str(k) if k % 3 else "x" for k in range(n)]
    expected = [1.0 if k % 3 else 0.0 for k in range(n)]
    batch = {"prompts": [f"p{k}" for k in range(n)], "completions": completions, "answer": answers}

    def spread(run: Any) -> Any:
        before = [items_counted(s.url) for s in (a, b)]
        out = run()
        done = [items_counted(s.url) - x for s, x in zip((a, b), before)]
        assert min(done) > 0, done
        return out

    assert spread(lambda: make_reward_func("exact_match", reference="answer", url=[a.url, b.url])(**batch)) == expected
    monkeypatch.setenv("REWARD_CLIENT_URL", urls)
    reward = make_async_reward_func("exact_match", reference="answer", name="em_instances")
    assert spread(lambda: asyncio.run(reward(**batch))) == expected
    monkeypatch.delenv("REWARD_CLIENT_URL")
    infos = [{"verifier": "exact_match"}] * n
    outs = spread(lambda: verl.compute_score_batch(["any"] * n, completions, answers, infos, reward_service_url=urls))
    assert [o["score"] for o in outs] == expected

    monkeypatch.setenv("REWARD_CLIENT_URL", urls)

    def sample(k: int) -> dict[str, Any]:
        return openrlhf.reward_func([f"Q{k}: The answer is \\boxed{{{k}}}"], [f"Q{k}:"], [str(k) if k % 3 else "x"])

    with ThreadPoolExecutor(16) as pool:
        rewards = spread(lambda: [r["rewards"][0] for r in pool.map(sample, range(300))])
    assert rewards == [1.0 if k % 3 else 0.0 for k in range(300)]
