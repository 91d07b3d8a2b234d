"""Sandbox slots are shared round-robin by client, then by request: another client's trivial program is answered
within 2 s while a 400-case stdin item is being judged, and a client sending many requests at once takes one
client's turns, against a real server; and the slot queue itself, on real runs."""
from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sandbox.api import RunRequest, RunStatus, run_source
from sandbox.bwrap import BwrapBackend, BwrapConfig
from sandbox.fairslots import FairSlots
from tests.support.server import LiveServer, run_server

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CASES = 400  # 16 runs of 25 cases over 4 slots: the item outlasts the trivial requests by seconds
SLOW_CASE = "import time\ntime.sleep(0.05)\nprint(int(input()) * 2)\n"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with run_server(tmp_path_factory.mktemp("fairness")) as server:
        yield server


def test_a_trivial_run_is_answered_within_2s_while_a_400_case_item_is_judged(srv: LiveServer) -> None:
    big: dict[str, object] = {}

    def judge_big() -> None:
        item = {"verifier": "code", "response": f"```python\n{SLOW_CASE}```",
                "reference": {"cases": [{"input": f"{i}\n", "output": f"{2 * i}\n"} for i in range(CASES)]}}
        with srv.client(timeout=600) as c:
            response = c.post("/v1/verify", json={"items": [item]})
        big["done_at"] = time.monotonic()
        big["body"] = response.json()

    thread = threading.Thread(target=judge_big)
    thread.start()
    try:
        time.sleep(1.5)  # the item's cases now fill every slot and the slot queue
        assert "done_at" not in big
        with srv.client() as c:
            started = time.monotonic()
            run = c.post("/v1/sandbox/run", json={"code": "print(1)"})
            run_s = time.monotonic() - started
            started = time.monotonic()
            verify = c.post("/v1/verify", json={"items": [{
                "verifier": "code", "response": "```python\nprint(input())\n```",
                "reference": {"cases": [{"input": "7\n", "output": "7\n"}]}}]})
            verify_s = time.monotonic() - started
        answered_at = time.monotonic()
    finally:
        thread.join(timeout=600)
    assert run.status_code == 200 and run.json()["status"] == "ok" and run.json()["stdout"] == "1\n"
    assert verify.status_code == 200 and verify.json()["results"][0]["score"] == 1.0
    assert run_s < 2.0, f"a trivial /v1/sandbox/run waited {run_s:.2f}s behind the 400-case item"
    assert verify_s < 2.0, f"a trivial code item waited {verify_s:.2f}s behind the 400-case item"
    assert big["done_at"] > answered_at, "the big item finished first: the test measured nothing"
    result = big["body"]["results"][0]
    assert result["score"] == 1.0 and result["details"]["passed"] == CASES


async def _order_of_grants(slots: FairSlots, plan: list[str]) -> list[str]:
    """Hold the only slot, queue ``plan`` (one waiter per source name), release: the order waiters get it."""
    order: list[str] = []

    async def one(source: str) -> None:
        async with slots.hold(source):
            order.append(source)
            await asyncio.sleep(0)

    async with slots.hold("holder"):
        tasks = [asyncio.create_task(one(s)) for s in plan]
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    return order


def test_waiters_take_turns_by_source_and_keep_their_order_within_one() -> None:
    order = asyncio.run(_order_of_grants(FairSlots(1), ["big"] * 5 + ["small"]))
    assert order == ["big", "small", "big", "big", "big", "big"]


def test_a_clients_parallel_requests_share_one_turn() -> None:
    async def scenario() -> list[str]:
        slots = FairSlots(1)
        order: list[str] = []

        async def one(source: str, client: str) -> None:
            async with slots.hold(source, client):
                order.append(source)
                await asyncio.sleep(0)

        async with slots.hold("holder", "holder"):
            tasks = [asyncio.create_task(one(f"a{i}", "a")) for i in range(4)]
            tasks.append(asyncio.create_task(one("b0", "b")))
            tasks.append(asyncio.create_task(one("b1", "b")))
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["a0", "b0", "a1", "b1", "a2", "a3"]


def test_one_client_flooding_parallel_requests_does_not_push_another_client_back(tmp_path: Path) -> None:
    """Client A (127.0.0.1) sends twice as many slow programs as there are slots, each its own request; client B
    (127.0.0.2) then sends one trivial program. B runs in the next free slot, before A's second round ends (by
    request, B would wait behind all of A's queued requests)."""
    slots, slow = 2, 1.5
    env = {"REWARD_SERVICE_SANDBOX_MAX_CONCURRENT": str(slots), "REWARD_SERVICE_SANDBOX_WARM_POOL": str(slots)}
    with run_server(tmp_path, env=env) as server:
        done: dict[str, float] = {}

        def run_a(i: int) -> None:
            with httpx.Client(base_url=server.url, timeout=120) as c:
                r = c.post("/v1/sandbox/run", json={"code": f"import time\ntime.sleep({slow})\nprint({i})"})
            assert r.status_code == 200 and r.json()["stdout"] == f"{i}\n", r.text
            done[f"a{i}"] = time.monotonic()

        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with concurrent.futures.ThreadPoolExecutor(2 * slots) as pool:
            flood = [pool.submit(run_a, i) for i in range(2 * slots)]
            time.sleep(slow / 2)  # A's first round runs, its second waits for slots
            with httpx.Client(base_url=server.url, timeout=120, transport=transport) as c:
                r = c.post("/v1/sandbox/run", json={"code": "print('b')"})
            done["b"] = time.monotonic()
            for f in flood:
                f.result()
    assert r.status_code == 200 and r.json()["stdout"] == "b\n", r.text
    finished_after_b = sorted(k for k, t in done.items() if k != "b" and t > done["b"])
    assert len(finished_after_b) >= slots - 1, (
        f"client B waited behind client A's queued requests: only {finished_after_b} of A's ended after it")


def test_a_cancelled_waiter_gives_up_its_place_and_no_slot_is_lost() -> None:
    async def scenario() -> list[str]:
        slots = FairSlots(1)
        got: list[str] = []

        async def one(name: str) -> None:
            async with slots.hold(name):
                got.append(name)

        async with slots.hold("holder"):
            doomed = asyncio.create_task(one("doomed"))
            kept = asyncio.create_task(one("kept"))
            await asyncio.sleep(0)
            doomed.cancel()
            await asyncio.sleep(0)
        await kept
        async with slots.hold("after"):  # the slot came back
            got.append("after")
        return got

    assert asyncio.run(scenario()) == ["kept", "after"]


def test_real_runs_of_a_late_source_are_not_queued_behind_an_earlier_batch(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[RunStatus], int, int]:
        backend = BwrapBackend(BwrapConfig(warm_pool=1, max_concurrent=1))
        await backend.start()
        finished: list[str] = []
        try:
            async def batch() -> list[RunStatus]:
                results = await backend.run_many([RunRequest(code="print(1)") for _ in range(12)])
                finished.append("batch")
                return [r.status for r in results]

            async def late() -> RunStatus:
                await asyncio.sleep(0.05)
                token = run_source.set("late")
                try:
                    result = await backend.run(RunRequest(code="print(2)"))
                finally:
                    run_source.reset(token)
                finished.append("late")
                return result.status

            statuses, late_status = await asyncio.gather(batch(), late())
            return [*statuses, late_status], finished.index("late"), backend.stats["runs"]
        finally:
            await backend.close()

    statuses, late_position, runs = asyncio.run(scenario())
    assert statuses == [RunStatus.OK] * 13 and runs == 13
    assert late_position == 0, "the late source's run waited for the whole earlier batch"


def test_a_higher_priority_waiter_goes_before_every_lower_one_then_turns_hold() -> None:
    async def scenario() -> list[str]:
        slots = FairSlots(1)
        order: list[str] = []

        async def one(source: str, client: str, priority: int) -> None:
            async with slots.hold(source, client, priority):
                order.append(source)
                await asyncio.sleep(0)

        async with slots.hold("holder", "holder"):
            tasks = [asyncio.create_task(one(f"low{i}", "a", -1)) for i in range(3)]
            tasks += [asyncio.create_task(one(f"norm{i}", "b", 0)) for i in range(2)]
            tasks += [asyncio.create_task(one("high-a", "a", 1)), asyncio.create_task(one("high-c", "c", 1))]
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["high-a", "high-c", "norm0", "norm1", "low0", "low1", "low2"]
