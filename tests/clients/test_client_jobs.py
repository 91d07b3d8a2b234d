"""``submit()``: one future per item, resolved as the verdicts stream in, over several instances, and nothing lost
when an instance restarts without its job store (the undecided items are submitted again, each answered once); the
coalescer's jobs path that the trainer adapters' ``use_jobs`` takes."""
from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from pathlib import Path

import httpx
import pytest
from reward_client import AsyncRewardClient, RewardClient
from reward_client.client import connect
from reward_client.coalesce import Coalescer
from reward_client.errors import RequestRejected
from reward_client.protocol import ClientConfig

from tests.support.live_restart import Restarter
from tests.support.processes import wait_until
from tests.support.server import LiveServer, run_server

NO_SANDBOX = {"REWARD_SERVICE_SANDBOX_BACKEND": "none"}


def test_submit_resolves_early_verdicts_first_over_two_instances(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with run_server(tmp_path / "a", NO_SANDBOX) as a, run_server(tmp_path / "b", NO_SANDBOX) as b:
        items = [{"verifier": "test_sleep", "response": "x", "options": {"seconds": 20}, "id": "slow"},
                 *({"verifier": "exact_match", "response": str(i), "reference": str(i), "id": f"q{i}"}
                   for i in range(7))]
        with RewardClient([a.url, b.url], chunk_size=4) as client:
            sub = client.submit(items, priority="high", tags=["step:3"])
            assert len(sub.futures) == 8 and {url for url, _ in sub.jobs} == {a.url, b.url}
            quick = sub.futures[1:]
            concurrent.futures.wait(quick, timeout=60)
            assert all(f.done() and f.result().score == 1.0 for f in quick)
            assert not sub.futures[0].done(), "the slow item was decided as early as the quick ones"
            sub.cancel()
            slow = sub.futures[0].result(timeout=30)
            assert slow.status == "cancelled" and slow.score is None and slow.id == "slow"


def test_submit_resubmits_what_a_restarted_instance_without_a_store_lost(tmp_path: Path) -> None:
    server = Restarter(tmp_path, {**NO_SANDBOX, "REWARD_SERVICE_JOBS_STORE": "off"})
    srv = server.start()
    try:
        items = [{"verifier": "test_sleep", "response": "x", "options": {"seconds": 0.5}, "id": f"i{i}"}
                 for i in range(12)]

        async def scenario() -> list[str]:
            async with AsyncRewardClient(srv.url) as client:
                sub = await client.submit(items)
                await asyncio.to_thread(wait_until, lambda: sum(f.done() for f in sub.futures) >= 1, 60,
                                        "a first verdict")
                srv.proc.kill()  # no drain: the job's unfinished items go with the process
                await asyncio.to_thread(server.stop)
                await asyncio.to_thread(server.start)
                results = await asyncio.wait_for(asyncio.gather(*sub.futures), 180)
                assert len({job for _, job in sub.jobs}) == 2  # the lost job's rest went in a second one
                assert sum(f.done() for f in sub.futures) == 12
                return [f"{r.id}:{r.status}" for r in results]

        assert asyncio.run(scenario()) == [f"i{i}:ok" for i in range(12)]
    finally:
        server.stop()


def test_coalesced_callers_share_one_job_and_each_returns_with_its_own_verdicts(server: LiveServer) -> None:
    """What the trainer adapters' ``use_jobs`` runs on: concurrent callers of one coalescer go as one job (per
    priority and tags); a caller returns as soon as its own items are decided, while another's slow item runs on;
    an item the service refuses fails only its own caller."""
    tag = f"coalesced-{uuid.uuid4().hex[:8]}"
    coalescer = Coalescer(ClientConfig([server.url]), connect, window_s=0.05)
    quick = [{"verifier": "exact_match", "response": str(i % 2), "reference": "1", "id": f"q{i}"} for i in range(5)]
    slow = {"verifier": "test_sleep", "response": "x", "options": {"seconds": 60}, "id": "slow"}
    refused = {"verifier": "no_such_verifier", "response": "x", "id": "bad"}

    async def scenario() -> None:
        calls = [asyncio.ensure_future(coalescer.averify_as_job([item], "high", [tag]))
                 for item in (slow, refused, *quick)]
        got = await asyncio.wait_for(asyncio.gather(*calls[2:]), 60)
        assert [r[0].score for r in got] == [0.0, 1.0, 0.0, 1.0, 0.0] and [r[0].id for r in got] == [
            f"q{i}" for i in range(5)]
        with pytest.raises(RequestRejected) as refusal:
            await calls[1]
        assert "no_such_verifier" in str(refusal.value)
        assert not calls[0].done(), "the quick callers waited for the slow item"
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            jobs = (await http.get("/v1/jobs", params={"tag": tag})).json()["jobs"]
            assert [(j["priority"], j["counts"]["total"]) for j in jobs] == [("high", 6)]
            assert (await http.delete("/v1/jobs", params={"tag": tag})).json()["cancelled"] == [jobs[0]["id"]]
        (cancelled,) = await asyncio.wait_for(calls[0], 30)
        assert (cancelled.id, cancelled.status, cancelled.score) == ("slow", "cancelled", None)

    try:
        asyncio.run(scenario())
    finally:
        coalescer.close()
