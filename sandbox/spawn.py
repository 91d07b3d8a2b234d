"""Starting a child process under asyncio so that a cancel can never leave the loop waiting forever.

On Python 3.11, a cancel that lands while ``asyncio.create_subprocess_exec`` connects the child's pipes leaves the
transport half-made: the child runs, nobody holds it, and asyncio's clean-up later waits on it without end (a
shutdown that hung ``reward-service score`` when the embedded runtime closed while its warm pool was still starting
sandboxes). Here a cancel lets the start finish, hands the started process to the caller's clean-up, then goes on.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any


def kill_child(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL a child that asyncio's child watcher waits for, without reaping it here. ``proc.kill()`` goes through
    ``subprocess.Popen.send_signal``, which polls the child first: when the child has just exited (a sandbox whose
    supervisor was killed a moment before, a worker that died), that poll reaps it before the watcher's thread
    does, and the watcher then logs "Unknown child process pid N, will report returncode 255" and reports 255. Only
    the watcher reaps; until it has (``returncode`` is set from its thread), the pid is still this child's."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


async def kill_and_wait(proc: asyncio.subprocess.Process) -> None:
    """The clean-up of a child that holds its pipes alone: killed (``kill_child``), reaped by asyncio's child
    watcher, and its transport closed once the exit is known, also when the caller is cancelled meanwhile (a
    transport left to the garbage collector polls the child itself when it closes)."""
    kill_child(proc)
    waiting = asyncio.ensure_future(proc.wait())
    waiting.add_done_callback(lambda _: _close_transport(proc))
    await asyncio.shield(waiting)


def _close_transport(proc: asyncio.subprocess.Process) -> None:
    transport = getattr(proc, "_transport", None)  # asyncio.subprocess.Process offers no public close
    if transport is not None and proc.returncode is not None:
        transport.close()


async def start_process(*argv: str, abandon: Callable[[asyncio.subprocess.Process], Awaitable[None]] = kill_and_wait,
                        **kwargs: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec(*argv, **kwargs)``, never cancelled halfway: on a cancel the start finishes
    and ``abandon`` disposes of the process (it must end it and wait for it, e.g. by killing its whole cgroup where
    grandchildren hold its pipes) before the cancel goes on."""
    start = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **kwargs))
    try:
        return await asyncio.shield(start)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await abandon(await start)
        raise
