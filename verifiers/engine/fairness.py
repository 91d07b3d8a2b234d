"""Whose items a free worker takes next: the pool's backlog (``FairQueue``) takes turns between sources, so one
request's thousands of items (or a client sending pathological ones) cannot hold back every item queued after them,
and ``WorkerShares`` is the policy that caps what one source may hold. Items of one source keep their order."""
from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class RunPolicy(Protocol):
    """What ``FairQueue.take_run`` asks before it hands one source's items to a worker."""

    def size_for(self, queued: int) -> int:
        """How many of a source's ``queued`` items one run takes at most."""
        ...

    def held(self, source: str) -> bool:
        """The source has its share: it waits while another source has items."""
        ...

    def barred(self, source: str) -> bool:
        """The source gets no run now, even on an idle worker."""
        ...

    def full_runs(self, source: str) -> bool:
        """False: the source gets one item per run."""
        ...


class WorkerShares:
    """The pool's fairness policy, kept per source (a request's key). A source already on its share of the workers
    waits while another source has items. A source not proven (no chunk done yet, or its last chunk had a check set
    aside) gets one item per chunk and at most half of the workers, counting its set-aside ones until it was ever
    proven: a request of runaway checks cannot take every worker before it is known to be slow, and a big batch with
    one slow answer goes on at once (its next one-item chunk proves it again)."""

    def __init__(self, workers: int, max_chunk: int) -> None:
        self.workers = max(1, workers)
        self.max_chunk = max_chunk
        self.busy: Counter[str] = Counter()  # workers running each source's chunks
        self.proven: set[str] = set()  # sources whose last chunk was done with no check set aside
        self.ever_proven: set[str] = set()
        self.aside: Counter[str] = Counter()  # set-aside workers still running each source's check
        self._share = self.workers

    def sharing(self, waiting: Iterable[str]) -> WorkerShares:
        """Split the workers between the sources ``waiting`` and those running; returns self for ``take_run``."""
        self._share = max(1, self.workers // len(set(waiting) | {s for s, c in self.busy.items() if c > 0}))
        return self

    def size_for(self, queued: int) -> int:
        return min(self.max_chunk, -(-queued // self.workers))

    def held(self, source: str) -> bool:
        return self.busy[source] >= self._share

    def barred(self, source: str) -> bool:
        counted = self.busy[source] - (self.aside[source] if source in self.ever_proven else 0)
        return source not in self.proven and counted >= max(1, self.workers // 2)

    def full_runs(self, source: str) -> bool:
        return source in self.proven

    def started(self, source: str) -> None:
        """A worker took a chunk of ``source``'s."""
        self.busy[source] += 1

    def ended(self, source: str, still_waiting: bool) -> None:
        """A chunk of ``source``'s ended; a source with nothing left waiting is forgotten."""
        self.busy[source] -= 1
        if self.busy[source] <= 0:
            del self.busy[source]
            if not still_waiting:
                self.proven.discard(source)
                self.ever_proven.discard(source)

    def proved(self, source: str) -> None:
        """A chunk of ``source``'s was done with no check set aside."""
        self.proven.add(source)
        self.ever_proven.add(source)

    def set_aside(self, source: str) -> None:
        self.proven.discard(source)
        self.aside[source] += 1

    def aside_ended(self, source: str) -> None:
        self.aside[source] -= 1
        if self.aside[source] <= 0:
            del self.aside[source]


def _normal(_: object) -> int:
    return 0


class FairQueue(Generic[T]):
    """Round-robin over sources (named by a string: a request's or client's key); each source is first-in first-out.
    A source has a priority (``priority_of`` its first item; higher first): ``take_run`` serves the highest priority
    with an open source, and round-robin within it."""

    def __init__(self, priority_of: Callable[[T], int] = _normal) -> None:
        self._queues: dict[str, deque[T]] = {}
        self._turns: deque[str] = deque()  # sources with items, in the order they are served next
        self._size = 0
        self._priority_of = priority_of
        self._priority: dict[str, int] = {}  # of each source with items
        self._mixed = 0  # sources whose priority is not 0: while none, priorities cost nothing

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def sources(self) -> Iterable[str]:
        """The sources with items waiting."""
        return self._queues.keys()

    def _opened(self, source: str, item: T) -> deque[T]:
        queue = self._queues[source] = deque()
        priority = self._priority[source] = self._priority_of(item)
        self._mixed += priority != 0
        return queue

    def _closed(self, source: str) -> None:
        del self._queues[source]
        self._mixed -= self._priority.pop(source) != 0

    def append(self, source: str, item: T) -> None:
        queue = self._queues.get(source)
        if queue is None:
            queue = self._opened(source, item)
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
            self._closed(source)
        return item

    def take_run(self, policy: RunPolicy) -> tuple[str | None, list[T]]:
        """Items of one source for one worker: the first source in turn that is neither held nor barred by ``policy``
        (when all are held, the first not barred, so a free worker idles only when every source is barred),
        ``policy.size_for(its queue length)`` of them at most, or one where ``policy.full_runs`` is false. One source
        per run, so no request's item waits in a worker behind another request's slow one. ``(None, [])`` when every
        source is barred."""
        open_sources = [s for s in self._turns if not policy.barred(s)]
        if self._mixed and open_sources:
            top = max(self._priority[s] for s in open_sources)
            open_sources = [s for s in open_sources if self._priority[s] == top]
        source = next((s for s in open_sources if not policy.held(s)), open_sources[0] if open_sources else None)
        if source is None:
            return None, []
        self._turns.remove(source)
        queue = self._queues[source]
        wanted = max(1, policy.size_for(len(queue))) if policy.full_runs(source) else 1
        run = [queue.popleft() for _ in range(min(len(queue), wanted))]
        self._size -= len(run)
        if queue:
            self._turns.append(source)
        else:
            self._closed(source)
        return source, run

    def push_front(self, items: Iterable[tuple[str, T]]) -> None:
        """Put items back at the head of their sources' queues, those sources served first (a retry after a worker
        died keeps its place)."""
        for source, item in reversed(list(items)):
            queue = self._queues.get(source)
            if queue is None:
                queue = self._opened(source, item)
            else:
                self._turns.remove(source)
            queue.appendleft(item)
            self._turns.appendleft(source)
            self._size += 1

    def drop(self, unwanted: Callable[[T], bool]) -> int:
        """Take every ``unwanted`` item out (a cancelled request's); each source keeps its place in line. Returns
        how many went."""
        dropped = 0
        for source in list(self._queues):
            queue = self._queues[source]
            kept = deque(item for item in queue if not unwanted(item))
            if len(kept) == len(queue):
                continue
            dropped += len(queue) - len(kept)
            if kept:
                self._queues[source] = kept
            else:
                self._closed(source)
                self._turns.remove(source)
        self._size -= dropped
        return dropped

    def drain(self) -> Iterator[T]:
        while self:
            yield self.popleft()
