"""Closing while children are still starting ends, and leaves no child behind: the sandbox backend closed while
its warm pool starts sandboxes, the worker pool closed while its workers start (a cancel that lands while asyncio
connects a child's pipes used to leave the loop waiting forever: ``reward-service score`` hung when it sent no row).
Each scenario runs many times in a fresh interpreter with a timeout, since the window is a few milliseconds wide."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SANDBOX = """
import asyncio
from sandbox.bwrap import BwrapBackend, BwrapConfig

async def once(delay):
    backend = BwrapBackend(BwrapConfig(warm_pool=4))
    await backend.start()
    await asyncio.sleep(delay)
    await backend.close()

for i in range(ROUNDS):
    asyncio.run(once(0.001 * (i % 7)))
print("closed")
"""

WORKERS = """
import asyncio
from verifiers.engine.pool import WorkerPool

async def once(delay):
    pool = WorkerPool(2, ["verifiers.kinds.basic"])
    start = asyncio.create_task(pool.start())
    await asyncio.sleep(delay)
    start.cancel()
    await asyncio.gather(start, return_exceptions=True)
    await pool.close()

for i in range(ROUNDS):
    asyncio.run(once(0.0005 * (i % 9)))
print("closed")
"""


def run_rounds(script: str, rounds: int) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(script).replace("ROUNDS", str(rounds))
    try:
        return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"closing hung: {exc.stderr!r}")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
@pytest.mark.parametrize("attempt", range(3))
def test_closing_the_sandbox_backend_while_sandboxes_start_ends(attempt: int) -> None:
    done = run_rounds(SANDBOX, 8)
    assert done.returncode == 0 and done.stdout.strip() == "closed", done.stderr[-2000:]
    assert "is closed" not in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("attempt", range(2))
def test_cancelling_the_worker_pool_while_workers_start_leaves_no_child_behind(attempt: int) -> None:
    done = run_rounds(WORKERS, 18)
    assert done.returncode == 0 and done.stdout.strip() == "closed", done.stderr[-2000:]
    assert "is closed" not in done.stderr, "a worker outlived its pool's event loop:\n" + done.stderr[-2000:]
