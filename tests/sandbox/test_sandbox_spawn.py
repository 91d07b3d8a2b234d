"""Ending a child process under asyncio: only asyncio's child watcher reaps it. ``proc.kill()`` polls the child
first (``subprocess.Popen.send_signal``), which reaps one that has just exited before the watcher's thread does;
the watcher then logs "Unknown child process pid N, will report returncode 255" (seen on clean ``reward-service
score`` runs, when a warm sandbox's bwrap exited as its supervisor was killed). Every kill path of the worker pool
and of the sandbox pool is checked for a wait from the calling thread, on real children, and the transport is
closed once the exit is known, also when the caller is cancelled meanwhile."""
from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from sandbox.bwrap.pool import Sandbox
from sandbox.spawn import kill_and_wait, kill_child, start_process
from verifiers.engine.pool import _Worker


async def _child(code: str = "import time; time.sleep(60)") -> asyncio.subprocess.Process:
    return await start_process(sys.executable, "-c", code, stdin=asyncio.subprocess.PIPE,
                               stdout=asyncio.subprocess.PIPE)


@pytest.fixture()
def waits_here(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every poll of a child's ``subprocess.Popen`` (a ``waitpid`` from the caller's thread, which reaps a child
    that has exited); the watcher's threads wait with ``os.waitpid`` and are left alone."""
    calls: list[int] = []
    real = subprocess.Popen.poll

    def poll(self: subprocess.Popen[bytes]) -> int | None:
        calls.append(self.pid)
        return real(self)

    monkeypatch.setattr(subprocess.Popen, "poll", poll)
    return calls


async def _sandbox_kill(proc: asyncio.subprocess.Process) -> None:
    box = Sandbox(proc, asyncio.StreamReader(), None, None)  # type: ignore[arg-type]  # no bwrap: its kill path
    box.kill()
    await kill_and_wait(proc)


KILLS: dict[str, Callable[[asyncio.subprocess.Process], Any]] = {
    "kill_and_wait": kill_and_wait,
    "worker pool": lambda p: _Worker(p).kill(),
    "sandbox pool": _sandbox_kill,
}


@pytest.mark.parametrize("path", KILLS)
@pytest.mark.parametrize("state", ["running", "exiting"])
def test_a_child_is_reaped_only_by_the_watcher(path: str, state: str, waits_here: list[int],
                                               caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[asyncio.subprocess.Process]:
        procs = [await _child("import sys; sys.stdin.read()") for _ in range(4)]
        for proc in procs:
            if state == "exiting":  # it ends as it reads the end of its input: killed while it exits
                assert proc.stdin is not None
                proc.stdin.close()
            await KILLS[path](proc)
        return procs

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        procs = asyncio.run(main())
    # only this test's children count: a transport an earlier test left to the garbage collector polls its own
    # child when it is collected, whenever that happens
    mine = {p.pid for p in procs}
    assert [pid for pid in waits_here if pid in mine] == [], "a kill path waited for the child itself"
    assert all(p.returncode in (0, -9) for p in procs), [p.returncode for p in procs]
    assert all(p._transport.is_closing() for p in procs)  # type: ignore[attr-defined]
    assert "Unknown child process" not in caplog.text


def test_a_cancelled_kill_still_closes_the_transport_after_the_exit(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[asyncio.subprocess.Process]:
        procs = [await _child() for _ in range(6)]
        tasks = [asyncio.create_task(kill_and_wait(p) if i % 2 else _Worker(p).kill()) for i, p in enumerate(procs)]
        await asyncio.sleep(0)
        for task in tasks:
            task.cancel()  # the pool's close cancels a respawn that is killing its worker
        await asyncio.gather(*tasks, return_exceptions=True)
        for _ in range(300):  # the exits arrive through the watcher's threads
            if all(p.returncode is not None for p in procs):
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        return procs

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        procs = asyncio.run(main())
    assert all(p.returncode == -9 for p in procs)
    assert all(p._transport.is_closing() for p in procs)  # type: ignore[attr-defined]
    assert "Unknown child process" not in caplog.text


def test_kill_child_leaves_a_finished_child_alone() -> None:
    async def main() -> int | None:
        proc = await _child("pass")
        await proc.wait()
        kill_child(proc)  # already reaped and known: no signal to a pid that may be another process's now
        return proc.returncode

    assert asyncio.run(main()) == 0
