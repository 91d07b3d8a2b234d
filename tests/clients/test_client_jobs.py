"""``submit()``: one future per item, resolved as the verdicts stream in, over several instances, and nothing lost
when an instance restarts without its job store (the undecided items are submitted again, each answered once)."""
from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path

from reward_client import AsyncRewardClient, RewardClient

from tests.support.live_restart import Restarter
from tests.support.processes import wait_until
from tests.support.server import run_server

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
