"""Worker-pool isolation between requests: a check still running after ``slow_after_s`` is set aside (its worker
demoted and replaced at once), a request of runaway checks cannot take every worker, and a big batch with one slow
answer goes on. Assertions are on the order verdicts arrive in and on the pool once it is at rest, not on timings: a
job's deadline counts from its submission (not from before the pool started), later requests arrive once a
runaway holds a worker, the slow answer ends when the test opens its gate, and the pool is counted after every
replacement in flight has joined it."""
from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from verifiers.engine.pool import Job, WorkerPool
from verifiers.types import Status

PLUGINS = ["tests.support.plugins.testing_verifiers"]
PATIENCE_S = 120.0  # what a loaded machine may take; reaching it means the pool kept a request waiting


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.01)


async def arrivals(pool: WorkerPool, first: dict[str, Job], later: dict[str, Job],
                   gate: Path | None) -> dict[str, tuple[int, Status]]:
    """Submit ``first``, then ``later`` once a check holds a worker; each verdict's place in the order of arrival and
    its status. ``gate`` is opened once every job but the gated ones has its verdict and a check was set aside."""
    done: dict[str, tuple[int, Status]] = {}

    async def one(key: str, job: Job) -> None:
        verdict = await pool.submit(dataclasses.replace(job, admitted=time.monotonic()))
        done[key] = (len(done), verdict.status)

    tasks = [asyncio.create_task(one(k, j)) for k, j in first.items()]
    if later:
        await until(lambda: pool.stats.busy > 0, "a check holds a worker")
        tasks += [asyncio.create_task(one(k, j)) for k, j in later.items()]
    if gate is not None:
        held = sum(j.name == "test_gate" for j in (first | later).values())
        # the check itself: a pool that waited for the gated job would never answer the others
        await until(lambda: len(done) == len(first) + len(later) - held and pool.stats.extra.get("set_aside", 0) > 0,
                    "every other job answered while the gated one ran, after it was set aside")
        await asyncio.to_thread(gate.touch)
    await asyncio.wait_for(asyncio.gather(*tasks), PATIENCE_S)
    return done


def run(size: int, first: dict[str, Job], later: dict[str, Job] | None = None, *, gate: Path | None = None,
        slow_after_s: float = 0.3) -> tuple[dict[str, tuple[int, Status]], int, int]:
    async def main() -> tuple[dict[str, tuple[int, Status]], int, int]:
        pool = WorkerPool(size, PLUGINS, slow_after_s=slow_after_s)
        await pool.start()
        try:
            done = await arrivals(pool, first, later or {}, gate)
            await asyncio.wait_for(pool.settled(), PATIENCE_S)  # retired workers reaped, replacements joined
            return done, pool.stats.alive, pool.stats.extra.get("set_aside", 0)
        finally:
            await pool.close()

    return asyncio.run(main())


def hang(source: str) -> Job:
    return Job("test_hang", "x", None, {}, 3.0, source=source)


def sleep(source: str) -> Job:
    return Job("test_sleep", "x", None, {"seconds": 0.0}, 30.0, source=source)


def test_a_runaway_check_is_set_aside_and_another_request_is_served_before_its_deadline() -> None:
    done, alive, set_aside = run(1, {"hang": hang("A")}, {"fast": sleep("B")})
    assert done["hang"][1] is Status.TIMEOUT and done["fast"][1] is Status.OK
    assert done["fast"][0] < done["hang"][0]  # one worker, yet not kept waiting for the runaway's deadline
    assert set_aside == 1 and alive == 1  # the set-aside worker was retired, not kept beside its replacement


def test_a_request_of_runaway_checks_cannot_take_every_worker() -> None:
    hangs = {f"hang{i}": hang("hostile") for i in range(4)}
    done, alive, _ = run(2, hangs, {f"n{i}": sleep(f"normal{i}") for i in range(4)})
    assert all(done[f"hang{i}"][1] is Status.TIMEOUT for i in range(4))
    assert all(done[f"n{i}"][1] is Status.OK for i in range(4))
    assert max(done[f"n{i}"][0] for i in range(4)) < min(done[f"hang{i}"][0] for i in range(4))
    assert alive == 2


def test_a_batch_with_one_slow_answer_goes_on_without_waiting_for_it(tmp_path: Path) -> None:
    gate = tmp_path / "open"
    slow = Job("test_gate", "x", None, {"path": str(gate)}, 60.0, source="batch")
    jobs = {"first": sleep("batch"), "slow": slow} | {f"b{i}": sleep("batch") for i in range(20)}
    done, alive, set_aside = run(2, jobs, gate=gate, slow_after_s=1.0)
    assert all(status is Status.OK for _, status in done.values())  # a slow answer is still scored
    assert max(done[f"b{i}"][0] for i in range(20)) < done["slow"][0]  # answered while it ran (see arrivals)
    assert set_aside == 1 and alive == 2
