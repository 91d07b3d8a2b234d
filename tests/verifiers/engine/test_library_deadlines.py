"""Library use (no server) keeps its deadlines: a pathological check is killed with its worker, the call returns by
its deadline, and no thread or child process is left behind (issue 22)."""
from __future__ import annotations

import asyncio
import threading
import time

import psutil

from verifiers import VerifyItem, verify_sync
from verifiers.engine import LocalVerifier, local_engine
from verifiers.types import Status

# The final line of a real model answer (ProcessBench omnimath-120, Qwen2.5-Math-7B-Instruct; gold 2^{2000}):
# Math-Verify's sympy comparison of this 1,999-term sum of binomials runs for minutes.
PATHOLOGICAL = (r"the total number of ways is given by the sum: "
                r"\[ \boxed{\sum_{k=2}^{2000} (2^{k-1} - 1) \cdot \binom{2001-k}{1000}} \]")
DEADLINE_S = 2.0
SLACK_S = 20.0  # worker start-up (imports, 1-2 s) on a shared 2-core machine


def children() -> set[int]:
    """This process's descendants (a session-wide test server may be among them already)."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def settled(baseline: int, wait_s: float = 10.0) -> tuple[int, set[int]]:
    """Thread count and child processes once the threads that reap killed children have finished."""
    stop = time.monotonic() + wait_s
    while threading.active_count() > baseline and time.monotonic() < stop:
        time.sleep(0.05)
    return threading.active_count(), children()


def test_verify_sync_on_a_pathological_answer_returns_by_its_deadline_and_leaves_nothing_running() -> None:
    baseline, before = threading.active_count(), children()
    started = time.monotonic()
    verdict = verify_sync(VerifyItem("math_verify", PATHOLOGICAL, "2^{2000}", {"timeout_s": DEADLINE_S}))
    elapsed = time.monotonic() - started
    assert verdict.status is Status.TIMEOUT and verdict.score is None, verdict
    assert elapsed < DEADLINE_S + SLACK_S, elapsed
    assert settled(baseline) == (baseline, before)


def test_engine_local_loop_kills_overruns_and_goes_on_scoring() -> None:
    """The issue's case: ``asyncio.run(engine.verify(...))`` in a scoring loop. Each overrun costs one worker
    respawn, later items are scored normally, and the loop leaves no thread behind."""
    modules = ["verifiers.kinds.basic", "verifiers.kinds.math.verifier", "verifiers.kinds.math.math_verify_verifier"]
    items = [
        VerifyItem("math_verify", PATHOLOGICAL, "2^{2000}", {"timeout_s": DEADLINE_S}),
        VerifyItem("math", r"so $\boxed{\frac{12}{36}}$", r"\frac{1}{3}"),
        VerifyItem("math_verify", PATHOLOGICAL, "2^{2000}", {"timeout_s": DEADLINE_S}),
        VerifyItem("exact_match", "Paris", "paris"),
    ]

    async def main() -> list[tuple[Status, float | None, float]]:
        out = []
        async with local_engine(modules) as engine:
            for item in items:
                started = time.monotonic()
                verdict = await engine.verify(item)
                out.append((verdict.status, verdict.score, time.monotonic() - started))
        return out

    baseline, before = threading.active_count(), children()
    results = asyncio.run(main())
    assert [(s, v) for s, v, _ in results] == [(Status.TIMEOUT, None), (Status.OK, 1.0), (Status.TIMEOUT, None),
                                               (Status.OK, 1.0)]
    assert all(elapsed < DEADLINE_S + SLACK_S for _, _, elapsed in results), results
    assert settled(baseline) == (baseline, before)


def test_cheap_checks_run_inline_without_starting_a_worker() -> None:
    before = children()
    with LocalVerifier(["verifiers.kinds.basic"]) as local:
        verdicts = local.verify_many([VerifyItem("exact_match", " Paris ", "paris"),
                                      VerifyItem("multiple_choice", "Final answer: (C)", "C")])
        assert [v.score for v in verdicts] == [1.0, 1.0]
        assert local.engine is not None and local.engine.pool is not None and not local.engine.pool.stats.alive
        # A check that is not cheap (a user pattern) goes to the worker, which then exists.
        assert local.verify(VerifyItem("regex", "aaa", "a+")).score == 1.0
        assert local.engine.pool.stats.alive == 1
    assert settled(threading.active_count())[1] == before


def test_a_stuck_worker_dies_with_its_parent(tmp_path) -> None:
    """A script killed mid-check (or a crashed server) must not leave a worker spinning on a pathological input."""
    import os
    import subprocess
    import sys

    from tests.support.server import ROOT

    script = tmp_path / "dies.py"
    script.write_text(
        "import asyncio, os\n"
        "from verifiers.engine.pool import WorkerPool\n"
        "async def main():\n"
        "    pool = WorkerPool(1, ['tests.support.plugins.testing_verifiers'])\n"
        "    await pool.start()\n"
        "    print(next(iter(pool._all)).proc.pid, flush=True)\n"
        "    asyncio.ensure_future(pool.run('test_hang', 'x', None, {}, 300))\n"
        "    await asyncio.sleep(1.0)\n"
        "    os._exit(0)\n"
        "asyncio.run(main())\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    worker = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(worker).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        psutil.Process(worker).kill()
        raise AssertionError("the worker outlived its parent")
