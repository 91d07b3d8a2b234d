"""A cancellation scope: the work one caller asked for (an HTTP request, a job), stopped as a whole when the caller
goes away or the server shuts down, each unfinished piece answered with a ``cancelled`` verdict of its own.

The mechanism is asyncio's: ``cancel`` cancels the tasks running the scope's guarded pieces, and whatever each one
awaits is cancelled with it. That is what stops the work everywhere it can be waiting: a job queued in the worker
pool is dropped and one running there has its worker killed (``WorkerPool``), a sandbox run has its sandbox
destroyed with every process in it (``sandbox.bwrap``), a judge call is abandoned mid-flight and a call waiting
for its turn at a rate gate leaves the line. Cancelling the outer task would do the same but lose the results of
the pieces that were done; guarding each piece keeps them, so a drained request still gets its finished verdicts.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class CancelScope:
    """Cancelled at most once, with a reason that the cancelled pieces' answers carry."""

    def __init__(self) -> None:
        self.cancelled = False
        self.reason = ""
        self._tasks: set[asyncio.Task[object]] = set()

    def cancel(self, reason: str) -> None:
        """Stop every guarded piece now running; pieces guarded later answer at once. Safe to call twice (the first
        reason stays)."""
        if self.cancelled:
            return
        self.cancelled = True
        self.reason = reason
        try:
            me = asyncio.current_task()
        except RuntimeError:  # no running loop: nothing can be running either
            return
        for task in list(self._tasks):
            if task is not me:
                task.cancel()

    async def guard(self, work: Awaitable[T], on_cancel: Callable[[str], T]) -> T:
        """``work``'s result, or ``on_cancel(reason)`` when the scope is cancelled before or while it runs.

        A cancellation that does not come from this scope (the server's own shutdown, an outer timeout) is not
        absorbed: it goes on up as usual."""
        if self.cancelled:
            if asyncio.iscoroutine(work):
                work.close()  # never started: no "was never awaited" warning
            return on_cancel(self.reason)
        task = asyncio.current_task()
        if task is None:
            return await work
        self._tasks.add(task)
        try:
            return await work
        except asyncio.CancelledError:
            if self.cancelled and task.uncancel() == 0:
                return on_cancel(self.reason)
            raise
        finally:
            self._tasks.discard(task)
