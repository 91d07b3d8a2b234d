"""The one turn-taking policy (``sandbox.turns.FairTurns``) the sandbox's slots, the verifier pool's backlog and the
judges' rate gates share: priority first, then clients in turn, then a client's requests in turn, each request first
in first out; a waiter that leaves takes no one else's place; and, driven by random pushes, takes and removals, no
waiting client is ever passed over more than once per other client."""
from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.api import FairTurns, Place


def served(turns: FairTurns[str]) -> list[str]:
    return list(turns.drain())


def test_one_request_is_first_in_first_out() -> None:
    turns: FairTurns[str] = FairTurns()
    for i in range(5):
        turns.push(f"r{i}", "req")
    assert served(turns) == [f"r{i}" for i in range(5)]
    assert not turns and len(turns) == 0 and turns.peek() is None and turns.head() is None


def test_requests_of_no_client_take_turns_as_clients_of_their_own() -> None:
    turns: FairTurns[str] = FairTurns()
    for i in range(3):
        turns.push(f"big{i}", "big")
    turns.push("small", "small")
    assert served(turns) == ["big0", "small", "big1", "big2"]


def test_clients_take_turns_then_their_requests() -> None:
    turns: FairTurns[str] = FairTurns()
    for source in ("a1", "a2", "a3"):
        for i in range(2):
            turns.push(f"{source}.{i}", source, "A")
    turns.push("b1.0", "b1", "B")
    turns.push("b1.1", "b1", "B")
    # A and B alternate; inside A its three requests alternate, each in its own order.
    assert served(turns) == ["a1.0", "b1.0", "a2.0", "b1.1", "a3.0", "a1.1", "a2.1", "a3.1"]


def test_a_client_with_many_requests_cannot_starve_another() -> None:
    turns: FairTurns[str] = FairTurns()
    for r in range(200):  # one client floods 200 requests of 10 items each
        for i in range(10):
            turns.push(f"flood-{r}-{i}", f"flood-{r}", "flooder")
    for i in range(5):
        turns.push(f"lone-{i}", "lone-req", "lone")
    order = served(turns)
    assert len(order) == 2005
    lone_at = [k for k, item in enumerate(order) if item.startswith("lone")]
    assert lone_at == [1, 3, 5, 7, 9], "the lone client got one turn in two while it waited"


def test_a_higher_priority_goes_before_every_lower_one_and_turns_hold_within_it() -> None:
    turns: FairTurns[str] = FairTurns()
    for i in range(3):
        turns.push(f"low{i}", f"low{i}", "a", priority=-1)
    turns.push("norm0", "n0", "b")
    turns.push("norm1", "n1", "b")
    turns.push("high-a", "ha", "a", priority=1)
    turns.push("high-c", "hc", "c", priority=1)
    assert turns.head() == Place(1, "a", "ha")
    assert served(turns) == ["high-a", "high-c", "norm0", "norm1", "low0", "low1", "low2"]


def test_a_late_higher_priority_waiter_overtakes_a_long_backlog() -> None:
    turns: FairTurns[str] = FairTurns()
    for i in range(1000):
        turns.push(f"low{i}", "job-low", priority=-1)
    assert turns.pop() == "low0"
    turns.push("urgent", "job-high", priority=1)
    assert turns.pop() == "urgent"
    assert turns.pop() == "low1"


def test_a_removed_waiter_leaves_every_other_place_as_it_was() -> None:
    turns: FairTurns[str] = FairTurns()
    for name, source, client in [("a0", "ra", "A"), ("b0", "rb", "B"), ("a1", "ra", "A"), ("c0", "rc", "C"),
                                 ("d0", "rd1", "D"), ("d1", "rd1", "D"), ("d2", "rd2", "D")]:
        turns.push(name, source, client)
    assert turns.remove("d0", "rd1", "D")  # D's first request keeps its turn before D's second
    assert list(turns.places())[-2:] == [Place(0, "D", "rd1"), Place(0, "D", "rd2")]
    assert turns.remove("b0", "rb", "B")  # B's only waiter: B leaves the line
    assert not turns.remove("b0", "rb", "B"), "gone already"
    assert not turns.remove("a0", "ra", "C"), "a waiter is found under its own client only"
    assert turns.remove("a0", "ra", "A")  # A keeps its turn for its next waiter
    assert set(turns.sources()) == {"ra", "rc", "rd1", "rd2"}
    assert served(turns) == ["a1", "c0", "d1", "d2"]
    assert not turns.sources()


def test_a_head_leaving_unserved_costs_its_client_no_turn() -> None:
    turns: FairTurns[str] = FairTurns()
    turns.push("a0", "ra", "A")
    turns.push("a1", "ra", "A")
    turns.push("b0", "rb", "B")
    assert turns.pop(rotate=False) == "a0"  # gone, not served: A is still first
    assert turns.pop() == "a1"
    assert turns.pop() == "b0"


def test_work_pushed_back_to_the_front_is_served_next() -> None:
    turns: FairTurns[str] = FairTurns()
    turns.push("a0", "a")
    turns.push("b0", "b")
    turns.push("b1", "b")
    assert turns.take(Place(0, "b", "b"), 2) == ["b0", "b1"]
    turns.push_front("b1", "b")  # the worker died: its unfinished item keeps its place
    turns.push_front("b0", "b")
    assert turns.head() == Place(0, "b", "b") and turns.take(Place(0, "b", "b"), 2) == ["b0", "b1"]
    assert served(turns) == ["a0"]


def test_places_list_the_turns_in_order_and_a_take_is_one_turn() -> None:
    turns: FairTurns[str] = FairTurns()
    for i in range(4):
        turns.push(f"x{i}", "x", "C1")
    turns.push("y0", "y", "C1")
    turns.push("z0", "z", "C2")
    turns.push("h0", "h", "C3", priority=2)
    assert list(turns.places()) == [Place(2, "C3", "h"), Place(0, "C1", "x"), Place(0, "C1", "y"), Place(0, "C2", "z")]
    x = Place(0, "C1", "x")
    assert turns.waiting(x) == 4
    assert turns.take(x, 3) == ["x0", "x1", "x2"]  # a run of one source, as one turn: C1 and x go to the back
    assert list(turns.places())[1:] == [Place(0, "C2", "z"), Place(0, "C1", "y"), Place(0, "C1", "x")]
    assert len(turns) == 4 and set(turns.sources()) == {"x", "y", "z", "h"}


def test_drop_takes_the_unwanted_out_and_keeps_the_rest_in_line() -> None:
    turns: FairTurns[str] = FairTurns()
    for source in ("a", "b", "c"):
        for i in range(3):
            turns.push(f"{source}{i}", source)
    assert turns.drop(lambda item: item.startswith("b") or item == "a1") == 4
    assert len(turns) == 5 and set(turns.sources()) == {"a", "c"}
    assert served(turns) == ["a0", "c0", "a2", "c1", "c2"]


# ---------------------------------------------------------------- random use keeps every promise


# (operation, client or which waiter, source, priority); few of each, so that clients and sources share lines often
OPS = st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 2), st.integers(0, 1), st.sampled_from([0, 0, 0, 1])),
    st.tuples(st.just("pop"), st.just(0), st.just(0), st.just(0)),
    st.tuples(st.just("remove"), st.integers(0, 40), st.just(0), st.just(0)),
    st.tuples(st.just("front"), st.integers(0, 2), st.integers(0, 1), st.sampled_from([0, 0, 0, 1])),
), max_size=120)


@settings(max_examples=500, deadline=None, database=None)
@given(OPS)
def test_random_use_loses_nothing_keeps_request_order_and_serves_no_client_twice_while_another_waits(
        ops: list[tuple[str, int, int, int]]) -> None:
    turns: FairTurns[tuple[int, int, int, int]] = FairTurns()  # (client, source, priority, serial)
    waiting: dict[tuple[int, int, int], list[tuple[int, int, int, int]]] = defaultdict(list)
    # For each waiting (priority, client), and each waiting (priority, client, source): the other clients of its
    # priority (the client's other sources) served since it began to wait or was last served. Round-robin serves none
    # of them twice in that time, unless handed back to the front.
    served_since: dict[tuple[int, int], set[int]] = {}
    source_served_since: dict[tuple[int, int, int], set[int]] = {}

    def left(level: int, client: int, source: int) -> None:
        if not waiting[(level, client, source)]:
            source_served_since.pop((level, client, source), None)
        if not any(v for (p, c, _), v in waiting.items() if (p, c) == (level, client)):
            served_since.pop((level, client), None)

    for serial, (op, a, b, priority) in enumerate(ops):
        if op in ("push", "front"):
            item = (a, b + 10 * a, priority, serial)  # a client's sources are its own
            served_since.setdefault((priority, a), set())
            source_served_since.setdefault((priority, a, item[1]), set())
            if op == "push":
                turns.push(item, item[1], a, priority)
                waiting[(priority, a, item[1])].append(item)
            else:
                turns.push_front(item, item[1], a, priority)
                waiting[(priority, a, item[1])].insert(0, item)
                for others in served_since.values():
                    others.discard(a)
                for others in source_served_since.values():
                    others.discard(item[1])
        elif op == "pop" and turns:
            item = turns.pop()
            client, source, level, _ = item
            assert level == max(p for (p, _, _), v in waiting.items() if v), "a lower priority went first"
            assert waiting[(level, client, source)].pop(0) == item, "a request's items left out of order"
            for (p, other), others in served_since.items():
                if p == level and other != client:
                    assert client not in others, f"client {client} served twice while client {other} waited"
                    others.add(client)
            for (p, c, other), others in source_served_since.items():
                if (p, c) == (level, client) and other != source:
                    assert source not in others, f"request {source} served twice while request {other} waited"
                    others.add(source)
            served_since[(level, client)] = set()
            source_served_since[(level, client, source)] = set()
            left(level, client, source)
        elif op == "remove":
            everyone = [item for queue in waiting.values() for item in queue]
            if everyone:
                item = everyone[a % len(everyone)]
                assert turns.remove(item, item[1], item[0], item[2])
                waiting[(item[2], item[0], item[1])].remove(item)
                left(item[2], item[0], item[1])
        count = sum(len(v) for v in waiting.values())
        assert len(turns) == count and bool(turns) == (count > 0)
        assert set(turns.sources()) == {s for (_, _, s), v in waiting.items() if v}
    rest = list(turns.drain())
    assert sorted(rest, key=lambda i: i[3]) == sorted((i for v in waiting.values() for i in v), key=lambda i: i[3])
