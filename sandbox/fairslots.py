"""Sandbox slots shared round-robin between clients, and within a client between its requests, so neither a large
request (an item with hundreds of stdin cases, a batch of thousands of programs) nor many parallel requests of one
client can hold every slot while another client's single program waits behind them.

A source is any hashable key naming one request; callers name theirs with ``sandbox.api.run_source`` (the server uses
the request id) and the client it belongs to with ``sandbox.api.run_client`` (the server uses the peer's address). Turns
go to clients in order, and a client's turn to its sources in order: a client sending 50 requests at once gets the same
share as one sending a single request, and its own small request is not stuck behind its own big one. Runs with no
source each count as a source of their own (``run_many`` makes one per call), and a source with no client as a client of
its own. Waiters of a higher priority (a high-priority job's runs) go before every waiter of a lower one; the turns
above hold within a priority. Kept free of the server and the verifiers: the sandbox package imports neither.
"""
from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class _Client:
    """One client's waiting sources, served in turn, each source's waiters in arrival order."""

    __slots__ = ("waiting", "turns")

    def __init__(self) -> None:
        self.waiting: dict[Hashable, deque[asyncio.Future[None]]] = {}
        self.turns: deque[Hashable] = deque()

    def add(self, source: Hashable, fut: asyncio.Future[None]) -> None:
        queue = self.waiting.get(source)
        if queue is None:
            queue = self.waiting[source] = deque()
            self.turns.append(source)
        queue.append(fut)

    def next(self) -> asyncio.Future[None]:
        source = self.turns.popleft()
        queue = self.waiting[source]
        fut = queue.popleft()
        if queue:
            self.turns.append(source)
        else:
            del self.waiting[source]
        return fut

    def forget(self, source: Hashable, fut: asyncio.Future[None]) -> None:
        queue = self.waiting.get(source)
        if queue is None or fut not in queue:
            return
        queue.remove(fut)
        if not queue:
            del self.waiting[source]
            self.turns.remove(source)


class _Level:
    """The waiters of one priority: clients in turn, each client's sources in turn."""

    __slots__ = ("clients", "turns")

    def __init__(self) -> None:
        self.clients: dict[Hashable, _Client] = {}
        self.turns: deque[Hashable] = deque()  # clients with waiters, in the order they are served next


class FairSlots:
    """A semaphore whose waiters are served highest priority first (``sandbox.api.run_priority``), then one per
    client in turn, then one per source of that client in turn."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._levels: dict[int, _Level] = {}  # priorities with waiters

    def waiting(self) -> int:
        return sum(len(q) for level in self._levels.values() for c in level.clients.values()
                   for q in c.waiting.values())

    @asynccontextmanager
    async def hold(self, source: Hashable, client: Hashable | None = None, priority: int = 0) -> AsyncIterator[None]:
        await self._acquire(source, source if client is None else client, priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, source: Hashable, client: Hashable, priority: int) -> None:
        if self._free > 0 and not self._levels:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        level = self._levels.get(priority)
        if level is None:
            level = self._levels[priority] = _Level()
        waiting = level.clients.get(client)
        if waiting is None:
            waiting = level.clients[client] = _Client()
            level.turns.append(client)
        waiting.add(source, fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # granted just as the waiter was cancelled: pass the slot on
            else:
                self._forget(priority, client, source, fut)
            raise

    def _forget(self, priority: int, client: Hashable, source: Hashable, fut: asyncio.Future[None]) -> None:
        level = self._levels.get(priority)
        waiting = level.clients.get(client) if level is not None else None
        if level is None or waiting is None:
            return
        waiting.forget(source, fut)
        if not waiting.turns:
            del level.clients[client]
            level.turns.remove(client)
            if not level.turns:
                del self._levels[priority]

    def _release(self) -> None:
        while self._levels:
            priority = max(self._levels)
            level = self._levels[priority]
            client = level.turns.popleft()
            waiting = level.clients[client]
            fut = waiting.next()
            if waiting.turns:
                level.turns.append(client)
            else:
                del level.clients[client]
            if not level.turns:
                del self._levels[priority]
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1
