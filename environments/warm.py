"""Processes started ahead of the sessions that will take them: a session whose reset must start a Python process
and import a library (a ``bfcl`` worker: about a second of CPU) takes one already waiting, and the pool starts the
next in the background, so a reset costs the request it sends, not a process start.

A pool starts nothing until it is first asked (an instance that never serves the environment pays nothing), then
keeps ``size`` ready; a process that died while waiting is disposed of and never handed out; a start that fails
stops the refilling until the next take (no loop of failing starts). The service closes every pool at shutdown:
the waiting processes are killed and the starts under way cancelled.

The sandbox's own pool (``sandbox/bwrap/pool.py``) keeps sandboxes, with their uids, cgroups and reuse after a run;
this one keeps any process an environment starts for itself, outside the sandbox, and needs none of that.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class WarmProcesses(Generic[T]):
    def __init__(self, start: Callable[[], Awaitable[T]], alive: Callable[[T], bool],
                 dispose: Callable[[T], Awaitable[None]], size: int) -> None:
        self._start, self._alive, self._dispose, self.size = start, alive, dispose, size
        self._ready: list[T] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._closed = False
        self.stats = {"taken_warm": 0, "missed": 0, "started": 0, "start_failures": 0, "died_waiting": 0}

    async def take(self) -> T | None:
        """A ready process (the longest waiting), or None when none is: the caller starts its own. Either way the
        pool refills in the background."""
        got: T | None = None
        while self._ready and got is None:
            candidate = self._ready.pop(0)
            if self._alive(candidate):
                got = candidate
            else:
                self.stats["died_waiting"] += 1
                await self._dispose(candidate)
        self.stats["taken_warm" if got is not None else "missed"] += 1
        self._refill()
        return got

    @property
    def ready(self) -> int:
        return len(self._ready)

    def _refill(self) -> None:
        if self._closed:
            return
        for _ in range(self.size - len(self._ready) - len(self._starting)):
            task = asyncio.create_task(self._start_one())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _start_one(self) -> None:
        try:
            started = await self._start()
        except asyncio.CancelledError:
            raise
        except Exception:
            self.stats["start_failures"] += 1
            log.warning("a process for the warm pool failed to start; the pool refills at its next use",
                        exc_info=True)
            return
        self.stats["started"] += 1
        if self._closed:
            await self._dispose(started)
        else:
            self._ready.append(started)

    async def wait_ready(self, timeout_s: float) -> bool:
        """Whether the pool is full within ``timeout_s`` (for tests and benchmarks that want a warm start)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while len(self._ready) < self.size and loop.time() < deadline:
            if not self._starting:
                self._refill()
            await asyncio.sleep(0.02)
        return len(self._ready) >= self.size

    async def close(self) -> None:
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        for task in list(self._starting):
            with contextlib.suppress(BaseException):
                await task
        waiting, self._ready = self._ready, []
        await asyncio.gather(*(self._dispose(p) for p in waiting), return_exceptions=True)
