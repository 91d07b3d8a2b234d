"""Sandbox slots shared round-robin between clients, and within a client between its requests, so neither a large
request (an item with hundreds of stdin cases, a batch of thousands of programs) nor many parallel requests of one
client can hold every slot while another client's single program waits behind them.

A source is any hashable key naming one request; callers name theirs with ``sandbox.api.run_source`` (the server uses
the request id) and the client it belongs to with ``sandbox.api.run_client`` (the server uses the peer's address). Turns
go to clients in order, and a client's turn to its sources in order: a client sending 50 requests at once gets the same
share as one sending a single request, and its own small request is not stuck behind its own big one. Runs with no
source each count as a source of their own (``run_many`` makes one per call), and a source with no client as a client of
its own. Kept free of the server and the verifiers: the sandbox package imports neither.
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


class FairSlots:
    """A semaphore whose waiters are served one per client in turn, then one per source of that client in turn."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._clients: dict[Hashable, _Client] = {}
        self._turns: deque[Hashable] = deque()  # clients with waiters, in the order they are served next

    def waiting(self) -> int:
        return sum(len(q) for c in self._clients.values() for q in c.waiting.values())

    @asynccontextmanager
    async def hold(self, source: Hashable, client: Hashable | None = None) -> AsyncIterator[None]:
        await self._acquire(source, source if client is None else client)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, source: Hashable, client: Hashable) -> None:
        if self._free > 0 and not self._turns:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._clients.get(client)
        if waiting is None:
            waiting = self._clients[client] = _Client()
            self._turns.append(client)
        waiting.add(source, fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # granted just as the waiter was cancelled: pass the slot on
            else:
                self._forget(client, source, fut)
            raise

    def _forget(self, client: Hashable, source: Hashable, fut: asyncio.Future[None]) -> None:
        waiting = self._clients.get(client)
        if waiting is None:
            return
        waiting.forget(source, fut)
        if not waiting.turns:
            del self._clients[client]
            self._turns.remove(client)

    def _release(self) -> None:
        while self._turns:
            client = self._turns.popleft()
            waiting = self._clients[client]
            fut = waiting.next()
            if waiting.turns:
                self._turns.append(client)
            else:
                del self._clients[client]
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1
