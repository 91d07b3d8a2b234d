"""Processes started ahead for sessions (``environments.warm``): a process that died while waiting is never handed
out, a failing start does not loop, closing kills what waits and what is starting; and on a real server a ``bfcl``
reset after the first takes a worker already started, while shutting the server down leaves no worker behind."""
from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from environments.warm import WarmProcesses
from sandbox.spawn import kill_and_wait
from tests.support.server import run_env_server
from verifiers.kinds.bfcl import source


async def _sleeper() -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(600)",
                                                stdout=asyncio.subprocess.PIPE)


def _alive(proc: asyncio.subprocess.Process) -> bool:
    return proc.returncode is None


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_a_process_that_died_waiting_is_never_handed_out() -> None:
    async def run() -> None:
        pool = WarmProcesses(_sleeper, _alive, kill_and_wait, size=2)
        assert await pool.take() is None  # the first ask starts the pool; nothing is ready yet
        assert await pool.wait_ready(30)
        first, second = list(pool._ready)
        os.kill(first.pid, signal.SIGKILL)
        await first.wait()
        got = await pool.take()
        assert got is second and pool.stats["died_waiting"] == 1
        await kill_and_wait(got)
        await pool.close()

    asyncio.run(run())


def test_a_failing_start_stops_the_refill_until_the_next_take() -> None:
    starts = 0

    async def broken() -> asyncio.subprocess.Process:
        nonlocal starts
        starts += 1
        raise OSError("no such interpreter")

    async def run() -> None:
        pool = WarmProcesses(broken, _alive, kill_and_wait, size=3)
        assert await pool.take() is None
        await asyncio.sleep(0.3)
        assert starts == 3 and pool.stats["start_failures"] == 3 and pool.ready == 0  # one try each, no loop
        assert await pool.take() is None
        await asyncio.sleep(0.3)
        assert starts == 6
        await pool.close()

    asyncio.run(run())


def test_closing_kills_the_waiting_processes_and_the_starts_under_way() -> None:
    async def run() -> None:
        pids: list[int] = []
        started: asyncio.Queue[int] = asyncio.Queue()
        release = asyncio.Event()

        async def slow() -> asyncio.subprocess.Process:
            proc = await _sleeper()
            pids.append(proc.pid)
            started.put_nowait(proc.pid)
            try:
                await release.wait()  # a start that has its process but is not ready yet
            except asyncio.CancelledError:
                await kill_and_wait(proc)
                raise
            return proc

        pool = WarmProcesses(slow, _alive, kill_and_wait, size=2)
        await pool.take()
        for _ in range(2):
            await started.get()
        release.set()
        assert await pool.wait_ready(30)
        release.clear()
        taken = await pool.take()  # one handed out, its replacement starting and held at release
        await started.get()
        await pool.close()
        assert taken is not None and _alive(taken)  # a process handed out is its taker's, not the pool's
        assert len(pids) == 3 and [p for p in pids if p != taken.pid and not _gone(p)] == []
        await kill_and_wait(taken)

    asyncio.run(run())


def _bfcl_workers(server_pid: int) -> set[int]:
    """The bfcl worker processes whose parent is the server."""
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == server_pid and b"verifiers.kinds.bfcl.worker" in cmdline:
            out.add(int(entry.name))
    return out


@pytest.mark.skipif(not source.available(), reason="bfcl-eval is not installed")
def test_bfcl_resets_take_started_workers_and_shutdown_leaves_none(tmp_path: Path) -> None:
    with run_env_server(tmp_path, {"REWARD_SERVICE_ENV_BFCL_WARM_WORKERS": "2"}) as server:
        with server.client(timeout=120) as c:

            def episode() -> str:
                sid = c.post("/envs/bfcl/reset", json={"task_id": "multi_turn_base_0"}).json()["observation"][
                    "session_id"]
                start: str = c.get("/envs/bfcl/state", params={"session_id": sid}).json()["worker_start"]
                step = c.post("/envs/bfcl/step", json={"session_id": sid, "action": {
                    "tool_calls": [{"name": "cd", "arguments": {"folder": "document"}}]}}).json()
                assert step["observation"]["results"][0]["result"] == '{"current_working_directory": "document"}'
                c.post("/envs/bfcl/close", json={"session_id": sid})
                return start

            assert episode() == "on demand"  # the first reset starts the pool
            deadline = time.monotonic() + 120
            starts = [episode()]
            while starts[-1] != "warm" and time.monotonic() < deadline:  # the pool is ready once its workers are
                time.sleep(0.5)
                starts.append(episode())
            assert starts[-1] == "warm", starts
            while len(waiting := _bfcl_workers(server.proc.pid)) != 2 and time.monotonic() < deadline:
                time.sleep(0.1)  # the closed sessions' workers go, the pool's two stay
            assert len(waiting) == 2
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=60)
        assert [p for p in waiting if not _gone(p)] == []


def test_the_pool_is_off_with_size_zero() -> None:
    from environments.base import EnvResources
    from environments.kinds.bfcl import worker_pool

    assert worker_pool(EnvResources()) is None and worker_pool(EnvResources(bfcl_warm_workers=0)) is None
    resources = EnvResources(bfcl_warm_workers=1)
    assert worker_pool(resources) is worker_pool(resources)  # one pool per service, made once
