"""Whose turn it is, for every queue many clients share: the sandbox's slots, the verifier pool's backlog and a judge
backend's rate gate all ask this one policy which waiter goes next.

Waiters of a higher priority (``sandbox.api.run_priority``: a high-priority job's work) go before every waiter of a
lower one. Within a priority, clients take turns, one waiter each; within a client, its sources (the requests it
sent) take turns; within a source, waiters go first in first out. A client sending 50 requests at once so gets one
client's share, and its own small request is not stuck behind its own big one. A waiter with no client is a client of
its own (its source names it).

Pure bookkeeping, with neither an event loop nor a clock: each user keeps what is truly its own (a count of free
slots, the workers' shares of a pool, a rate window) and asks ``FairTurns`` only whose turn comes. It lives in the
sandbox, the lowest package, so that the verifiers (through ``sandbox.api``) and the sandbox itself share one copy.
"""
from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Collection, Hashable, Iterator
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")


class Place(NamedTuple):
    """One source's line: its priority, its client and itself."""

    priority: int
    client: Hashable
    source: Hashable


class _Client(Generic[T]):
    """One client's waiting sources, served in turn, each first in first out."""

    __slots__ = ("queues", "order")

    def __init__(self) -> None:
        self.queues: dict[Hashable, deque[T]] = {}
        self.order: deque[Hashable] = deque()  # sources with waiters, in the order they are served next


class _Level(Generic[T]):
    """The waiters of one priority: clients in turn."""

    __slots__ = ("clients", "order")

    def __init__(self) -> None:
        self.clients: dict[Hashable, _Client[T]] = {}
        self.order: deque[Hashable] = deque()  # clients with waiters, in the order they are served next


def _to_back(line: deque[Hashable], key: Hashable, stays: bool) -> None:
    """``key`` had its turn: out of ``line``, and back at its end while it still has waiters."""
    if line[0] == key:
        line.popleft()
    else:
        line.remove(key)
    if stays:
        line.append(key)


def _to_front(line: deque[Hashable], key: Hashable, known: bool) -> None:
    if known:
        line.remove(key)
    line.appendleft(key)


class FairTurns(Generic[T]):
    """Waiting items in turns: highest priority first, then one client at a time in turn, then one of that client's
    sources at a time in turn, each source first in first out. Removing a waiter (a cancelled one) leaves every other
    waiter's place as it was."""

    def __init__(self) -> None:
        self._levels: dict[int, _Level[T]] = {}  # priorities with waiters
        self._size = 0
        self._sources: Counter[Hashable] = Counter()  # waiters of each source with any

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def sources(self) -> Collection[Hashable]:
        """The sources with waiters."""
        return self._sources.keys()

    def push(self, item: T, source: Hashable, client: Hashable | None = None, priority: int = 0) -> None:
        """``item`` waits last in ``source``'s line; a new source and a new client get the last turn."""
        level = self._levels.get(priority)
        if level is None:
            level = self._levels[priority] = _Level()
        who = source if client is None else client
        waiting = level.clients.get(who)
        if waiting is None:
            waiting = level.clients[who] = _Client()
            level.order.append(who)
        queue = waiting.queues.get(source)
        if queue is None:
            queue = waiting.queues[source] = deque()
            waiting.order.append(source)
        queue.append(item)
        self._counted(source, 1)

    def push_front(self, item: T, source: Hashable, client: Hashable | None = None, priority: int = 0) -> None:
        """``item`` goes first in ``source``'s line, and that source and its client have the next turns (work handed
        back keeps its place)."""
        level = self._levels.get(priority)
        if level is None:
            level = self._levels[priority] = _Level()
        who = source if client is None else client
        waiting = level.clients.get(who)
        _to_front(level.order, who, waiting is not None)
        if waiting is None:
            waiting = level.clients[who] = _Client()
        queue = waiting.queues.get(source)
        _to_front(waiting.order, source, queue is not None)
        if queue is None:
            queue = waiting.queues[source] = deque()
        queue.appendleft(item)
        self._counted(source, 1)

    def head(self) -> Place | None:
        """Whose turn it is now."""
        if not self._levels:
            return None
        priority = max(self._levels)
        level = self._levels[priority]
        client = level.order[0]
        return Place(priority, client, level.clients[client].order[0])

    def peek(self) -> T | None:
        """The item whose turn it is, left waiting."""
        place = self.head()
        return None if place is None else self._queue(place)[0]

    def pop(self, rotate: bool = True) -> T:
        """The item whose turn it is. With ``rotate`` it was served: its source and its client go to the back of
        their lines. Without, it leaves unserved (a waiter found gone) and every other waiter keeps its place."""
        place = self.head()
        if place is None:
            raise IndexError("pop from empty FairTurns")
        if rotate:
            return self.take(place, 1)[0]
        item = self._queue(place)[0]
        self.remove(item, place.source, place.client, place.priority)
        return item

    def places(self) -> Iterator[Place]:
        """Every source with waiters, in the order their turns come: highest priority first, then clients in turn,
        each client's sources in turn. For a user that passes a turn by (a source already holding its share): the
        first place it accepts is the fair one. Take nothing while iterating."""
        for priority in sorted(self._levels, reverse=True):
            level = self._levels[priority]
            for client in level.order:
                for source in level.clients[client].order:
                    yield Place(priority, client, source)

    def waiting(self, place: Place) -> int:
        """How many items wait in ``place``'s line."""
        return len(self._queue(place))

    def take(self, place: Place, most: int) -> list[T]:
        """Up to ``most`` items from the head of ``place``'s line, as one turn: its source and its client then go to
        the back of their lines (or leave them, with nothing left)."""
        level = self._levels[place.priority]
        waiting = level.clients[place.client]
        queue = waiting.queues[place.source]
        items = [queue.popleft() for _ in range(min(most, len(queue)))]
        self._counted(place.source, -len(items))
        if not queue:
            del waiting.queues[place.source]
        _to_back(waiting.order, place.source, bool(queue))
        if not waiting.order:
            del level.clients[place.client]
        _to_back(level.order, place.client, bool(waiting.order))
        if not level.order:
            del self._levels[place.priority]
        return items

    def remove(self, item: T, source: Hashable, client: Hashable | None = None, priority: int = 0) -> bool:
        """Take ``item`` out (its waiter is gone); every other waiter keeps its place. False: it was not waiting."""
        place = Place(priority, source if client is None else client, source)
        level = self._levels.get(priority)
        waiting = level.clients.get(place.client) if level is not None else None
        queue = waiting.queues.get(source) if waiting is not None else None
        if queue is None or item not in queue:
            return False
        queue.remove(item)
        self._counted(source, -1)
        if not queue:
            self._emptied(place)
        return True

    def drop(self, unwanted: Callable[[T], bool]) -> int:
        """Take every ``unwanted`` item out (a cancelled request's); every other waiter keeps its place. Returns how
        many went."""
        dropped = 0
        for place in list(self.places()):
            queue = self._queue(place)
            kept = [item for item in queue if not unwanted(item)]
            gone = len(queue) - len(kept)
            if not gone:
                continue
            dropped += gone
            self._counted(place.source, -gone)
            queue.clear()
            queue.extend(kept)
            if not queue:
                self._emptied(place)
        return dropped

    def drain(self) -> Iterator[T]:
        """Every item, in turn, each taken out as it is yielded."""
        while self:
            yield self.pop()

    def _queue(self, place: Place) -> deque[T]:
        return self._levels[place.priority].clients[place.client].queues[place.source]

    def _counted(self, source: Hashable, change: int) -> None:
        self._size += change
        left = self._sources[source] + change
        if left > 0:
            self._sources[source] = left
        else:
            del self._sources[source]

    def _emptied(self, place: Place) -> None:
        """``place``'s line is empty: it leaves its client's turns, and an idle client leaves its priority's."""
        level = self._levels[place.priority]
        waiting = level.clients[place.client]
        del waiting.queues[place.source]
        waiting.order.remove(place.source)
        if not waiting.order:
            del level.clients[place.client]
            level.order.remove(place.client)
            if not level.order:
                del self._levels[place.priority]
