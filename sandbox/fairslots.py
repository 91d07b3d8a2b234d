"""Sandbox slots shared round-robin between clients, and within a client between its requests, so neither a large
request (an item with hundreds of stdin cases, a batch of thousands of programs) nor many parallel requests of one
client can hold every slot while another client's single program waits behind them.

A source is any hashable key naming one request; callers name theirs with ``sandbox.api.run_source`` (the server uses
the request id), the client it belongs to with ``sandbox.api.run_client`` (the server uses the peer's address) and its
priority with ``sandbox.api.run_priority``. Runs with no source each count as a source of their own (``run_many`` makes
one per call), and a source with no client as a client of its own. Whose turn comes is ``sandbox.turns.FairTurns``'s
policy (priority, then client, then request), the one the verifier pool's backlog and the judges' rate gates use too;
this module keeps only the count of free slots.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

from sandbox.turns import FairTurns


class FairSlots:
    """A semaphore whose waiters are served highest priority first (``sandbox.api.run_priority``), then one per
    client in turn, then one per source of that client in turn."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._turns: FairTurns[asyncio.Future[None]] = FairTurns()

    def waiting(self) -> int:
        return len(self._turns)

    @asynccontextmanager
    async def hold(self, source: Hashable, client: Hashable | None = None, priority: int = 0) -> AsyncIterator[None]:
        await self._acquire(source, client, priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, source: Hashable, client: Hashable | None, priority: int) -> None:
        if self._free > 0 and not self._turns:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._turns.push(fut, source, client, priority)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # granted just as the waiter was cancelled: pass the slot on
            else:
                self._turns.remove(fut, source, client, priority)
            raise

    def _release(self) -> None:
        while (fut := self._turns.peek()) is not None:
            if fut.done():  # cancelled, its waiter not yet woken to leave: it loses no one else their turn
                self._turns.pop(rotate=False)
                continue
            self._turns.pop()
            fut.set_result(None)
            return
        self._free += 1
