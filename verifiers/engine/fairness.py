"""Whose items a free worker takes next: the pool's backlog (``FairQueue``) takes turns between sources, so one
request's thousands of items (or a client sending pathological ones) cannot hold back every item queued after them,
and ``WorkerShares`` is the policy that caps what one source may hold. Items of one source keep their order. The turns
are ``sandbox.api.FairTurns``'s, the one policy the sandbox's slots and the judges' rate gates use too; what is the
pool's own here is the runs (several items of one source for one worker) and the shares."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, Protocol, TypeVar, cast

from sandbox.api import FairTurns, Place

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
    """Round-robin over sources (named by a string: a request's or a job's key; each its own client), each source
    first-in first-out, an item at its priority (``priority_of`` it; higher first): ``take_run`` serves the highest
    priority with an open source, and round-robin within it."""

    def __init__(self, priority_of: Callable[[T], int] = _normal) -> None:
        self._turns: FairTurns[T] = FairTurns()
        self._priority_of = priority_of

    def __len__(self) -> int:
        return len(self._turns)

    def __bool__(self) -> bool:
        return bool(self._turns)

    def sources(self) -> Iterable[str]:
        """The sources with items waiting."""
        return cast(Iterable[str], self._turns.sources())

    def append(self, source: str, item: T) -> None:
        self._turns.push(item, source, priority=self._priority_of(item))

    def popleft(self) -> T:
        """The next item of the source whose turn it is; that source then goes to the back of the line."""
        return self._turns.pop()

    def take_run(self, policy: RunPolicy) -> tuple[str | None, list[T]]:
        """Items of one source for one worker: the first source in turn that is neither held nor barred by ``policy``
        (when all are held, the first not barred, so a free worker idles only when every source is barred),
        ``policy.size_for(its queue length)`` of them at most, or one where ``policy.full_runs`` is false. One source
        per run, so no request's item waits in a worker behind another request's slow one. ``(None, [])`` when every
        source is barred."""
        chosen: Place | None = None
        first_open: Place | None = None
        for place in self._turns.places():
            source = cast(str, place.source)
            if first_open is not None and place.priority < first_open.priority:
                break  # a higher priority has an open source: a lower one waits
            if policy.barred(source):
                continue
            if first_open is None:
                first_open = place
            if not policy.held(source):
                chosen = place
                break
        taken = chosen or first_open
        if taken is None:
            return None, []
        source = cast(str, taken.source)
        wanted = max(1, policy.size_for(self._turns.waiting(taken))) if policy.full_runs(source) else 1
        return source, self._turns.take(taken, wanted)

    def push_front(self, items: Iterable[tuple[str, T]]) -> None:
        """Put items back at the head of their sources' queues, those sources served first (a retry after a worker
        died keeps its place)."""
        for source, item in reversed(list(items)):
            self._turns.push_front(item, source, priority=self._priority_of(item))

    def drop(self, unwanted: Callable[[T], bool]) -> int:
        """Take every ``unwanted`` item out (a cancelled request's); each source keeps its place in line. Returns
        how many went."""
        return self._turns.drop(unwanted)

    def drain(self) -> Iterator[T]:
        return self._turns.drain()
