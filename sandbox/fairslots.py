"""Sandbox slots shared round-robin between sources, so one large request (an item with hundreds of stdin cases, a
batch of thousands of programs) cannot hold every slot while another client's single program waits behind it.

A source is any hashable key; callers name theirs with ``run_source`` (the server's code verifier uses the request
id). Runs with no source each count as a source of their own (``run_many`` makes one per call), which is first come,
first served among them. Kept free of the server and the verifiers: the sandbox package imports neither.
"""
from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

run_source: contextvars.ContextVar[Hashable | None] = contextvars.ContextVar("sandbox_run_source", default=None)


class FairSlots:
    """A semaphore whose waiters are served one per source in turn; each source's own waiters in arrival order."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiting: dict[Hashable, deque[asyncio.Future[None]]] = {}
        self._turns: deque[Hashable] = deque()  # sources with waiters, in the order they are served next

    def waiting(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    @asynccontextmanager
    async def hold(self, source: Hashable) -> AsyncIterator[None]:
        await self._acquire(source)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, source: Hashable) -> None:
        if self._free > 0 and not self._turns:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiting.get(source)
        if queue is None:
            queue = self._waiting[source] = deque()
            self._turns.append(source)
        queue.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # granted just as the waiter was cancelled: pass the slot on
            else:
                self._forget(source, fut)
            raise

    def _forget(self, source: Hashable, fut: asyncio.Future[None]) -> None:
        queue = self._waiting.get(source)
        if queue is None or fut not in queue:
            return
        queue.remove(fut)
        if not queue:
            del self._waiting[source]
            self._turns.remove(source)

    def _release(self) -> None:
        while self._turns:
            source = self._turns.popleft()
            queue = self._waiting[source]
            fut = queue.popleft()
            if queue:
                self._turns.append(source)
            else:
                del self._waiting[source]
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1
