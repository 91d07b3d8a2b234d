"""A queue that takes turns between sources: the pool's backlog, so one request's thousands of items (or a client
sending pathological ones) cannot hold back every item queued after them. Items of one source keep their order."""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    """Round-robin over sources (named by a string: a request's or client's key); each source is first-in first-out."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[T]] = {}
        self._turns: deque[str] = deque()  # sources with items, in the order they are served next
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def sources(self) -> Iterable[str]:
        """The sources with items waiting."""
        return self._queues.keys()

    def append(self, source: str, item: T) -> None:
        queue = self._queues.get(source)
        if queue is None:
            queue = self._queues[source] = deque()
            self._turns.append(source)
        queue.append(item)
        self._size += 1

    def popleft(self) -> T:
        """The next item of the source whose turn it is; that source then goes to the back of the line."""
        source = self._turns.popleft()
        queue = self._queues[source]
        item = queue.popleft()
        self._size -= 1
        if queue:
            self._turns.append(source)
        else:
            del self._queues[source]
        return item

    def take_run(self, size_for: Callable[[int], int], held: Callable[[str], bool],
                 barred: Callable[[str], bool] = lambda s: False,
                 full_runs: Callable[[str], bool] = lambda s: True) -> tuple[str | None, list[T]]:
        """Items of one source for one worker: the first source in turn that is neither ``held`` nor ``barred`` (when
        all are held, the first not barred, so a free worker idles only when every source is barred),
        ``size_for(its queue length)`` of them at most, or one where ``full_runs`` is false. One source per run, so no
        request's item waits in a worker behind another request's slow one. ``(None, [])`` when every source is
        barred."""
        open_sources = [s for s in self._turns if not barred(s)]
        source = next((s for s in open_sources if not held(s)), open_sources[0] if open_sources else None)
        if source is None:
            return None, []
        self._turns.remove(source)
        queue = self._queues[source]
        wanted = max(1, size_for(len(queue))) if full_runs(source) else 1
        run = [queue.popleft() for _ in range(min(len(queue), wanted))]
        self._size -= len(run)
        if queue:
            self._turns.append(source)
        else:
            del self._queues[source]
        return source, run

    def push_front(self, items: Iterable[tuple[str, T]]) -> None:
        """Put items back at the head of their sources' queues, those sources served first (a retry after a worker
        died keeps its place)."""
        for source, item in reversed(list(items)):
            queue = self._queues.get(source)
            if queue is None:
                queue = self._queues[source] = deque()
            else:
                self._turns.remove(source)
            queue.appendleft(item)
            self._turns.appendleft(source)
            self._size += 1

    def drain(self) -> Iterator[T]:
        while self:
            yield self.popleft()
