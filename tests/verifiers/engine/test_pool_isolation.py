"""Worker-pool isolation between requests (issue 22): a check still running after ``slow_after_s`` is set aside (its
worker demoted and replaced at once), a request of runaway checks cannot take every worker, and a big batch with one
slow answer goes on. Assertions are on the order verdicts arrive in, not on timings."""
from __future__ import annotations

import asyncio

from verifiers.engine.pool import Job, WorkerPool
from verifiers.types import Status

PLUGINS = ["tests.support.plugins.testing_verifiers"]


async def timed(pool: WorkerPool, jobs: dict[str, Job], delay: dict[str, float]) -> dict[str, tuple[float, Status]]:
    """Submit each job after its delay; when each verdict arrived (seconds from the start) and its status."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    done: dict[str, tuple[float, Status]] = {}

    async def one(key: str, job: Job) -> None:
        await asyncio.sleep(delay.get(key, 0.0))
        verdict = await pool.submit(job)
        done[key] = (loop.time() - started, verdict.status)

    await asyncio.gather(*(one(k, j) for k, j in jobs.items()))
    return done


def run(size: int, jobs: dict[str, Job], delay: dict[str, float]) -> tuple[dict[str, tuple[float, Status]], int, int]:
    async def main() -> tuple[dict[str, tuple[float, Status]], int, int]:
        pool = WorkerPool(size, PLUGINS, slow_after_s=0.3)
        await pool.start()
        try:
            done = await timed(pool, jobs, delay)
            await asyncio.sleep(0.5)  # retired workers reaped
            return done, pool.stats.alive, pool.stats.extra.get("set_aside", 0)
        finally:
            await pool.close()

    return asyncio.run(main())


def hang(source: str) -> Job:
    return Job("test_hang", "x", None, {}, 3.0, source=source)


def sleep(source: str, seconds: float = 0.0) -> Job:
    return Job("test_sleep", "x", None, {"seconds": seconds}, 30.0, source=source)


def test_a_runaway_check_is_set_aside_and_another_request_is_served_before_its_deadline() -> None:
    done, alive, set_aside = run(1, {"hang": hang("A"), "fast": sleep("B")}, {"fast": 0.1})
    assert done["hang"][1] is Status.TIMEOUT and done["fast"][1] is Status.OK
    assert done["fast"][0] < done["hang"][0]  # one worker, yet not kept waiting for the runaway's deadline
    assert set_aside == 1 and alive == 1  # the set-aside worker was retired, not kept beside its replacement


def test_a_request_of_runaway_checks_cannot_take_every_worker() -> None:
    jobs = {f"hang{i}": hang("hostile") for i in range(4)} | {f"n{i}": sleep(f"normal{i}") for i in range(4)}
    done, alive, _ = run(2, jobs, {f"n{i}": 0.1 for i in range(4)})
    assert all(done[f"hang{i}"][1] is Status.TIMEOUT for i in range(4))
    assert all(done[f"n{i}"][1] is Status.OK for i in range(4))
    assert max(done[f"n{i}"][0] for i in range(4)) < min(done[f"hang{i}"][0] for i in range(4))
    assert alive == 2


def test_a_batch_with_one_slow_answer_goes_on_without_waiting_for_it() -> None:
    jobs = {"first": sleep("batch")} | {"slow": sleep("batch", 1.5)} | {f"b{i}": sleep("batch") for i in range(20)}
    done, alive, set_aside = run(2, jobs, {})
    assert all(status is Status.OK for _, status in done.values())  # a slow answer is still scored
    assert max(done[f"b{i}"][0] for i in range(20)) < done["slow"][0]
    assert set_aside == 1 and alive == 2
