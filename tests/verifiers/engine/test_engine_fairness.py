"""The pool's backlog (``FairQueue``) over the shared turns: a run is one source's items, the first source in turn
that the worker shares neither hold nor bar (or, all held, the first not barred), within the highest priority that has
one open; work handed back goes first; a cancelled request's items leave and every other source keeps its place."""
from __future__ import annotations

from verifiers.engine.fairness import FairQueue, WorkerShares


def queue_of(plan: list[tuple[str, int]]) -> FairQueue[tuple[str, int]]:
    """Items ``(source, priority)`` in arrival order, each at its own priority."""
    queue: FairQueue[tuple[str, int]] = FairQueue(lambda item: item[1])
    for source, priority in plan:
        queue.append(source, (source, priority))
    return queue


def test_runs_take_turns_between_sources_and_are_sized_by_the_shares() -> None:
    queue = queue_of([("big", 0)] * 40 + [("small", 0)] * 2)
    shares = WorkerShares(workers=4, max_chunk=8)
    shares.proved("big")
    shares.proved("small")
    first = queue.take_run(shares.sharing(queue.sources()))
    assert first[0] == "big" and len(first[1]) == 8  # a proven source gets a full run, capped by max_chunk
    second = queue.take_run(shares.sharing(queue.sources()))
    assert second == ("small", [("small", 0)])  # ceil(2 / 4 workers): one item each
    assert queue.take_run(shares.sharing(queue.sources()))[0] == "big"
    assert len(queue) == 40 - 16 + 1 and set(queue.sources()) == {"big", "small"}


def test_an_unproven_source_gets_one_item_a_run() -> None:
    queue = queue_of([("new", 0)] * 5)
    shares = WorkerShares(workers=4, max_chunk=8)
    assert queue.take_run(shares.sharing(queue.sources())) == ("new", [("new", 0)])


def test_a_held_source_waits_while_another_has_items_and_a_barred_one_gets_nothing() -> None:
    queue = queue_of([("a", 0)] * 3 + [("b", 0)] * 3)
    shares = WorkerShares(workers=2, max_chunk=8)
    shares.proved("a")
    shares.proved("b")
    shares.started("a")  # a holds its share of the two workers: b goes first although a is first in line
    assert queue.take_run(shares.sharing(queue.sources()))[0] == "b"
    shares.started("b")
    assert queue.take_run(shares.sharing(queue.sources()))[0] == "a", "all held: the first in turn goes"
    barred = WorkerShares(workers=2, max_chunk=8)
    barred.started("a")
    barred.started("b")  # neither proven, each on half the workers: both barred, the worker idles
    assert queue.take_run(barred.sharing(queue.sources())) == (None, [])


def test_a_higher_priority_source_runs_first_unless_it_is_barred() -> None:
    queue = queue_of([("low", -1)] * 2 + [("norm", 0)] * 2 + [("high", 1)] * 2)
    shares = WorkerShares(workers=2, max_chunk=8)
    assert queue.take_run(shares.sharing(queue.sources()))[0] == "high"
    shares.started("high")  # unproven and on half the workers: barred, so the next priority gets the worker
    assert queue.take_run(shares.sharing(queue.sources()))[0] == "norm"


def test_handed_back_items_go_first_and_a_cancelled_requests_items_leave() -> None:
    queue = queue_of([("a", 0), ("b", 0), ("b", 0), ("c", 0)])
    assert queue.popleft() == ("a", 0)
    queue.push_front([("a", ("a", 0))])  # a worker died under it: it keeps its place at the head
    assert queue.drop(lambda item: item[0] == "b") == 2
    assert list(queue.drain()) == [("a", 0), ("c", 0)]
    assert not queue and len(queue) == 0
