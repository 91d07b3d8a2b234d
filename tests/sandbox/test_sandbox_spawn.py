"""Ending a child process under asyncio: killed, reaped once by asyncio's child watcher, its transport closed after
the exit is known, also when the caller is cancelled meanwhile. A transport left open is closed later by the garbage
collector, which polls the child itself and races the watcher's thread: the loser logs "Unknown child process pid
N, will report returncode 255" (seen on clean ``reward-service score`` runs) and the exit status is lost."""
from __future__ import annotations

import asyncio
import gc
import logging
import sys

import pytest

from sandbox.spawn import kill_and_wait, start_process
from verifiers.engine.pool import _Worker


async def _sleeper() -> asyncio.subprocess.Process:
    return await start_process(sys.executable, "-c", "import time; time.sleep(60)",
                               stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)


def test_a_killed_child_is_reaped_once_and_its_transport_closed(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[asyncio.subprocess.Process]:
        procs = [await _sleeper() for _ in range(6)]
        await asyncio.gather(*(kill_and_wait(p) for p in procs[:3]), *(_Worker(p).kill() for p in procs[3:]))
        return procs

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        procs = asyncio.run(main())
    for proc in procs:
        assert proc.returncode == -9
        assert proc._transport.is_closing()  # type: ignore[attr-defined]
    assert "Unknown child process" not in caplog.text


def test_a_cancelled_kill_still_closes_the_transport_after_the_exit(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[asyncio.subprocess.Process]:
        procs = [await _sleeper() for _ in range(8)]
        tasks = [asyncio.create_task(kill_and_wait(p) if i % 2 else _Worker(p).kill()) for i, p in enumerate(procs)]
        await asyncio.sleep(0)
        for task in tasks:
            task.cancel()  # the pool's close cancels a respawn that is killing its worker
        await asyncio.gather(*tasks, return_exceptions=True)
        for _ in range(200):  # the exits arrive through the watcher's threads
            if all(p.returncode is not None for p in procs):
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)
        for p in procs:
            assert p._transport.is_closing(), "left to the garbage collector, which polls the child"  # type: ignore[attr-defined]
        gc.collect()
        # a new child makes subprocess reap whatever it was handed by a collected, unclosed transport
        (await _sleeper()).kill()
        await asyncio.sleep(0.2)
        return procs

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        procs = asyncio.run(main())
    assert all(p.returncode == -9 for p in procs)
    assert "Unknown child process" not in caplog.text
