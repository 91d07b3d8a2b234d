"""Judge rate limits: the window account with a manual clock (exact, minutes in milliseconds), then the gate in
front of a real HTTP judge double, counted where the double sees the calls arrive."""
from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Iterator

import pytest

from reward_service.metrics import Metrics
from tests.support.fakes.openai_server import FakeOpenAI, Reply, serve
from tests.support.judges import MODULES, ManualClock, judge_backend, until
from verifiers.context import request_source
from verifiers.engine import Engine
from verifiers.engine.registry import load_modules
from verifiers.kinds.judges.backends import Sampling, TokenEstimate, usage_tokens
from verifiers.kinds.judges.ratelimit import Grant, Limits, RateLimiter, Window
from verifiers.kinds.judges.registry import JUDGES, JudgeRegistry
from verifiers.types import Status, VerifyItem


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with serve(FakeOpenAI(latency_s=0.01)) as f:
        yield f


@pytest.fixture(autouse=True)
def _clean(fake: FakeOpenAI) -> None:
    fake.reset()


def most_in_any_window(times: list[float], window: float) -> int:
    """The largest number of events inside any half-open window [t, t + window)."""
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - window + 1e-9:
            start += 1
        best = max(best, end - start + 1)
    return best


async def _serve_all(limiter: RateLimiter, clock: ManualClock, jobs: list[tuple[str, int]]) -> list[tuple[float, str]]:
    """Every job (source, tokens) through the gate at once; the arrivals as a double behind it would count them."""
    arrivals: list[tuple[float, str]] = []

    async def one(source: str, tokens: int) -> None:
        async with limiter.slot(source, tokens):
            arrivals.append((clock.now(), source))

    tasks = [asyncio.ensure_future(one(s, n)) for s, n in jobs]
    await clock.drive(tasks)
    return arrivals


# ---------------------------------------------------------------- the window, exactly


@pytest.mark.parametrize("burst", [None, 60])
def test_200_items_never_exceed_60_rpm_in_any_window(burst: int | None) -> None:
    clock = ManualClock()
    limiter = RateLimiter(Limits(requests_per_minute=60, burst=burst), clock)
    arrivals = asyncio.run(_serve_all(limiter, clock, [("a", 1)] * 150 + [("b", 1)] * 50))
    times = [t for t, _ in arrivals]
    assert len(times) == 200
    assert most_in_any_window(times, 60.0) == 60  # the limit is used, never exceeded
    if burst is None:  # paced: one per second, never two within a second
        assert most_in_any_window(times, 1.0) == 1
        assert max(times) == pytest.approx(199.0)
    else:  # the whole minute's allowance at once, then the window slides
        assert times.count(0.0) == 60
    assert limiter.stats().requests == 200


def test_second_source_is_served_interleaved_not_after_the_first() -> None:
    clock = ManualClock()
    limiter = RateLimiter(Limits(requests_per_minute=60, burst=60), clock)
    arrivals = asyncio.run(_serve_all(limiter, clock, [("big", 1)] * 150 + [("small", 1)] * 20))
    order = [s for _, s in arrivals]
    # The first minute's 60 go to the request that came first; from the next grant on, turns alternate.
    assert order[:60] == ["big"] * 60
    assert order[60:100] == ["big", "small"] * 20
    last_small = max(t for t, s in arrivals if s == "small")
    assert last_small == 60.0 and max(t for t, _ in arrivals) == 120.0  # FIFO: "small" would wait for t = 120


def test_a_client_with_many_requests_gets_one_client_share() -> None:
    """Turns go to clients first: ten parallel requests of one client do not get ten times a lone client's share."""
    clock = ManualClock()
    limiter = RateLimiter(Limits(requests_per_minute=60), clock)
    arrivals: list[tuple[str, str]] = []

    async def one(client: str, source: str) -> None:
        async with limiter.slot(source, 1, client):
            arrivals.append((client, source))

    async def go() -> None:
        jobs = [("many", f"r{r}") for r in range(10) for _ in range(4)] + [("lone", "only")] * 20
        await clock.drive([asyncio.ensure_future(one(c, s)) for c, s in jobs])

    asyncio.run(go())
    order = [c for c, _ in arrivals]
    assert order[1:41] == ["many", "lone"] * 20  # after the first grant, strict alternation between the clients
    many = [s for c, s in arrivals if c == "many"]
    assert len(set(many[1:11])) == 10  # and within the client, its requests take turns (the first went at once)


def test_tpm_counts_estimates_then_usage() -> None:
    window = Window(Limits(tokens_per_minute=1000))
    first = window.take(0.0, 400)
    window.take(1.0, 400)
    assert window.wait(2.0, 400) == pytest.approx(58.0)  # 1200 > 1000: wait for the first call to leave
    window.settle(first, 50)  # the server said it used 50
    assert window.wait(2.0, 400) == 0.0
    assert window.used(2.0) == (2, 450)
    assert window.wait(2.0, 5000) == pytest.approx(59.0)  # bigger than the whole budget: alone, window empty
    assert window.used(61.0) == (0, 0)
    assert window.wait(61.0, 5000) == 0.0


def test_tpm_limit_holds_over_many_calls_with_corrections() -> None:
    clock = ManualClock()
    limiter = RateLimiter(Limits(tokens_per_minute=1000), clock)
    charged: list[tuple[float, int]] = []

    async def one(i: int) -> None:
        async with limiter.slot(f"s{i % 3}", 300) as grant:
            used = 100 + (i * 37) % 250  # what the server reports differs from the estimate
            limiter.settle(grant, used)
            charged.append((clock.now(), used))

    async def go() -> None:
        await clock.drive([asyncio.ensure_future(one(i)) for i in range(60)])

    asyncio.run(go())
    assert len(charged) == 60
    for t0, _ in charged:  # in every window starting at a grant, usage stays within the budget
        assert sum(n for t, n in charged if t0 <= t < t0 + 60.0) <= 1000
    assert limiter.stats().tokens == sum(n for _, n in charged)


def test_retry_after_pause_holds_every_source() -> None:
    clock = ManualClock()
    limiter = RateLimiter(Limits(), clock)

    async def go() -> list[tuple[float, str]]:
        limiter.pause(30.0)
        return await _serve_all(limiter, clock, [("a", 1), ("b", 1), ("a", 1)])

    arrivals = asyncio.run(go())
    assert [t for t, _ in arrivals] == [30.0, 30.0, 30.0]
    assert [s for _, s in arrivals] == ["a", "b", "a"]
    assert limiter.stats().pauses == 1


def test_concurrency_cap_and_cancelled_waiter() -> None:
    clock = ManualClock()
    limiter = RateLimiter(Limits(max_concurrency=1), clock)

    async def go() -> list[str]:
        served: list[str] = []
        release = asyncio.Event()

        async def hold(name: str) -> None:
            async with limiter.slot(name, 1):
                served.append(name)
                await release.wait()

        first = asyncio.ensure_future(hold("first"))
        await asyncio.sleep(0)
        gone = asyncio.ensure_future(hold("gone"))
        last = asyncio.ensure_future(hold("last"))
        await asyncio.sleep(0)
        assert limiter.stats().waiting == 2 and limiter.stats().in_flight == 1
        gone.cancel()
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first, last)
        assert limiter.stats().in_flight == 0 and limiter.stats().waiting == 0
        return served

    assert asyncio.run(go()) == ["first", "last"]


# ---------------------------------------------------------------- the gate in front of a real HTTP double


def _item(source: str, i: int) -> VerifyItem:
    return VerifyItem("judge_reference", f"{source}-{i}: the answer is {i}", str(i))


def test_real_time_120_rpm_counted_at_the_double(fake: FakeOpenAI) -> None:
    async def go() -> list[str]:
        judges = JudgeRegistry({"default": judge_backend(fake.url, requests_per_minute=120)}, cache_size=0)
        engine = Engine(load_modules(MODULES), resources={JUDGES: judges}, default_timeout_s=60)
        try:
            verdicts = await engine.verify_many([_item("x", i) for i in range(9)])
        finally:
            await judges.aclose()
        return [v.status.value for v in verdicts]

    assert asyncio.run(go()) == ["ok"] * 9
    arrivals = sorted(fake.arrivals)
    assert len(arrivals) == 9
    interval, burst, slack = 0.5, 1, 0.3  # 120 RPM: one call per 0.5 s (slack: arrival jitter on a busy box)
    for i in range(len(arrivals)):
        for j in range(i + 1, len(arrivals)):
            assert arrivals[j] - arrivals[i] >= (j - i + 1 - burst) * interval - slack, (i, j, arrivals)
    assert most_in_any_window(arrivals, 60.0) <= 120


def test_second_client_not_starved_through_the_engine(fake: FakeOpenAI) -> None:
    async def client(engine: Engine, source: str, n: int) -> list[str]:
        request_source.set(source)  # what the server sets per request
        return [v.status.value for v in await engine.verify_many([_item(source, i) for i in range(n)])]

    async def go() -> None:
        judges = JudgeRegistry({"default": judge_backend(fake.url, max_concurrency=1)}, cache_size=0)
        engine = Engine(load_modules(MODULES), resources={JUDGES: judges}, default_timeout_s=60)
        try:
            big = asyncio.ensure_future(client(engine, "big", 30))
            await until(lambda: fake.calls > 0)  # the big request's items are queued at the gate first
            small = asyncio.ensure_future(client(engine, "small", 5))
            assert await big == ["ok"] * 30 and await small == ["ok"] * 5
        finally:
            await judges.aclose()

    asyncio.run(go())
    seen = ["small" if "small-" in p else "big" for p in fake.prompts()]
    positions = [i for i, s in enumerate(seen) if s == "small"]
    assert len(positions) == 5 and max(positions) <= 14, seen  # FIFO would put them at 30..34


def test_tpm_corrected_from_the_usage_the_server_returns(fake: FakeOpenAI) -> None:
    """Each call is estimated at 400+ tokens against a 1000 TPM budget; the double reports 20. Without the
    correction the third call would wait a minute (and the test would time out)."""
    fake.queue(*[Reply(usage={"prompt_tokens": 15, "completion_tokens": 5, "total_tokens": 20})] * 10)

    async def go() -> tuple[int, int]:
        backend = judge_backend(fake.url, tokens_per_minute=1000)
        try:
            for i in range(10):
                messages = [{"role": "user", "content": f"question {i}"}]
                await asyncio.wait_for(backend.complete(messages, Sampling(max_tokens=400)), 20)
            stats = backend.limiter_stats()
            return stats.tokens, stats.window_tokens
        finally:
            await backend.aclose()

    assert asyncio.run(go()) == (200, 200)
    assert fake.calls == 10


@pytest.mark.parametrize(("status", "header"), [(429, "seconds"), (429, "http-date"), (503, "seconds"),
                                                 (503, "http-date")])
def test_retry_after_pauses_other_calls_too(fake: FakeOpenAI, status: int, header: str) -> None:
    value = "1" if header == "seconds" else email.utils.formatdate(time.time() + 2, usegmt=True)
    fake.queue(Reply(status=status, headers={"Retry-After": value}))

    async def go() -> list[str]:
        backend = judge_backend(fake.url, max_retries=2, backoff_max_s=5.0)
        try:
            first = asyncio.ensure_future(
                backend.complete([{"role": "user", "content": "one"}], Sampling()))
            await until(lambda: fake.calls > 0)
            await asyncio.sleep(0.1)  # the 429 is back and the pause set before the other call starts
            others = [backend.complete([{"role": "user", "content": f"other {i}"}], Sampling())
                      for i in range(3)]
            return list(await asyncio.gather(first, *others))
        finally:
            await backend.aclose()

    assert len(asyncio.run(go())) == 4
    arrivals = sorted(fake.arrivals)
    assert len(arrivals) == 5  # the refused call, its retry, three others
    # An HTTP date has whole seconds: 2 s ahead is at least 1 s away when it is read.
    assert all(t - arrivals[0] >= 0.9 for t in arrivals[1:]), arrivals


def test_limits_visible_in_metrics(fake: FakeOpenAI) -> None:
    async def go() -> bytes:
        judges = JudgeRegistry({"default": judge_backend(fake.url, requests_per_minute=600, tokens_per_minute=90_000)})
        engine = Engine(load_modules(MODULES), resources={JUDGES: judges}, default_timeout_s=60)
        try:
            verdicts = await engine.verify_many([_item("m", i) for i in range(3)])
            assert all(v.status == Status.OK for v in verdicts)
            metrics = Metrics()
            metrics.judge_limits.source = judges.limiter_stats
            return metrics.render()
        finally:
            await judges.aclose()

    text = asyncio.run(go()).decode()
    lines = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith("reward_judge_")}
    assert lines['reward_judge_limit_requests_per_minute{backend="default"}'] == 600
    assert lines['reward_judge_limit_tokens_per_minute{backend="default"}'] == 90_000
    assert lines['reward_judge_requests_total{backend="default"}'] == 3
    assert lines['reward_judge_window_requests{backend="default"}'] == 3
    assert 0 < lines['reward_judge_tokens_total{backend="default"}'] == lines[
        'reward_judge_window_tokens{backend="default"}']
    assert lines['reward_judge_queue_depth{backend="default"}'] == 0
    assert 'reward_judge_rate_wait_seconds_total{backend="default"}' in lines


@pytest.mark.parametrize(("body", "expected"), [
    ({"usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}, (12, 15)),
    ({"usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 0}}, (12, 15)),  # servers that send 0
    ({"usage": {"prompt_tokens": 12}}, (12, 12)),
    ({"usage": {"prompt_tokens": True, "total_tokens": 5}}, None),
    ({"usage": {"prompt_tokens": "12", "total_tokens": 15}}, None),
    ({"usage": None}, None),
    ({}, None),
    ([], None),
])
def test_usage_is_read_only_when_well_formed(body: object, expected: tuple[int, int] | None) -> None:
    assert usage_tokens(body) == expected


def test_token_estimate_learns_from_usage() -> None:
    estimate = TokenEstimate()
    messages = [{"role": "user", "content": "x" * 3000}]
    first = estimate(messages, 100)
    assert first == 1000 + 4 + 100  # 3 characters per token until the server says otherwise
    for _ in range(30):
        estimate.learn(messages, 500)  # the server counts 6 characters per token
    assert estimate(messages, 100) == pytest.approx(500 + 4 + 100, abs=5)


def test_items_that_time_out_at_the_gate_spend_no_calls(fake: FakeOpenAI) -> None:
    """Under 60 RPM the second call waits a second at the gate; items giving up before that leave the queue and their
    calls are never sent (the cache cancels a call once nobody waits for it)."""
    async def go() -> tuple[list[str], int]:
        judges = JudgeRegistry({"default": judge_backend(fake.url, requests_per_minute=60)})
        engine = Engine(load_modules(MODULES), resources={JUDGES: judges}, default_timeout_s=60)
        try:
            items = [VerifyItem("judge_reference", f"the answer is {i}", str(i), {"timeout_s": 0.3}) for i in range(5)]
            verdicts = await engine.verify_many(items)
            await asyncio.sleep(1.5)  # past the pacing interval: an abandoned call would have gone by now
            return [v.status.value for v in verdicts], judges.limiter_stats()["default"].waiting
        finally:
            await judges.aclose()

    statuses, waiting = asyncio.run(go())
    assert statuses == ["ok"] + ["timeout"] * 4
    assert fake.calls == 1 and waiting == 0


def test_limits_hold_under_a_hostile_mix() -> None:
    """300 calls from 40 requests of 8 clients, random sizes, holds and usage, a fifth of the callers giving up while
    waiting, Retry-After pauses: no 60 s window over the RPM or the TPM (as settled), never over the concurrency cap,
    every caller that stayed is served, and the gate ends empty."""
    import random

    rng = random.Random(7)
    clock = ManualClock()
    limits = Limits(requests_per_minute=50, tokens_per_minute=6000, max_concurrency=3, burst=5)
    limiter = RateLimiter(limits, clock)
    sent: list[tuple[float, list[int]]] = []  # (time, [tokens charged]) per call, the list updated on settle
    busy = [0, 0]  # now, most
    believed: list[int] = []  # the account right after each grant, that call's estimate in it
    take = limiter.window.take

    def recording_take(now: float, tokens: int) -> Grant:
        grant = take(now, tokens)
        believed.append(limiter.window.used(now)[1])
        return grant

    limiter.window.take = recording_take  # type: ignore[method-assign]

    async def call(i: int) -> str:
        client, source = f"c{i % 8}", f"r{i % 40}"
        estimate = rng.randint(50, 900)
        async with limiter.slot(source, estimate, client) as grant:
            busy[0] += 1
            busy[1] = max(busy)
            charged = [estimate]
            sent.append((clock.now(), charged))
            await clock.sleep(rng.uniform(0, 5))
            if i % 37 == 0:
                limiter.pause(rng.uniform(1, 20))
            used = rng.randint(0, 1200)
            limiter.settle(grant, used)
            charged[0] = used
            busy[0] -= 1
        return "served"

    async def go() -> list[str]:
        tasks = [asyncio.ensure_future(call(i)) for i in range(300)]
        quitters = rng.sample(range(300), 60)

        async def cancel_later() -> None:
            for i in quitters:
                await clock.sleep(rng.uniform(0, 3))
                tasks[i].cancel()

        canceller = asyncio.ensure_future(cancel_later())
        await clock.drive([canceller])
        await clock.drive([t for t in tasks if not t.cancelled()] or [canceller])
        return ["cancelled" if t.cancelled() else t.result() for t in tasks]

    outcomes = asyncio.run(go())
    assert outcomes.count("served") == len(sent) >= 240  # the rest gave up (some after being served)
    times = [t for t, _ in sent]
    assert most_in_any_window(times, 60.0) <= 50
    # Usage can come back larger than estimated, so what a window is charged afterwards may pass the TPM; the gate's
    # promise is that it never lets a call go that its account (estimates, corrected as usage arrives) cannot fit.
    assert max(believed) <= 6000
    assert busy[1] <= 3
    stats = limiter.stats()
    assert stats.waiting == 0 and stats.in_flight == 0
    assert stats.tokens == sum(c[0] for _, c in sent)


def test_closing_the_gate_fails_its_waiters() -> None:
    async def go() -> BaseException | None:
        limiter = RateLimiter(Limits(max_concurrency=1))
        await limiter.acquire("a", 1)
        waiting = asyncio.ensure_future(limiter.acquire("b", 1))
        await asyncio.sleep(0)
        await limiter.aclose(ValueError("shut down"))
        try:
            await waiting
        except ValueError as exc:
            return exc
        return None

    assert str(asyncio.run(go())) == "shut down"


def test_named_backend_settings_reach_the_gate() -> None:
    from reward_service.resources.judges import build_judges
    from reward_service.settings import Settings

    settings = Settings.model_validate({"judges": {
        "base_url": "http://127.0.0.1:9/v1", "model": "m", "requests_per_minute": 90, "max_concurrency": 4,
        "backends": {"hosted": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                                "requests_per_minute": 500, "tokens_per_minute": 80_000, "burst": 10}}}})
    judges = build_judges(settings)
    gates = {name: backend.limiter.limits for name, backend in judges.backends.items()}  # type: ignore[attr-defined]
    assert gates["default"] == Limits(90, None, None, 4)
    assert gates["hosted"] == Limits(500, 80_000, 10, 4)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Settings.model_validate({"judges": {"backends": {"x": {"kind": "openai", "base_url": "u", "model": "m",
                                                               "requests_per_minute": 0}}}})


def test_a_high_priority_call_overtakes_queued_low_ones_at_the_gate() -> None:
    clock = ManualClock()
    limiter = RateLimiter(Limits(requests_per_minute=60), clock)
    arrivals: list[str] = []

    async def one(client: str, source: str, priority: int) -> None:
        async with limiter.slot(source, 1, client, priority):
            arrivals.append(source)

    async def go() -> None:
        low = [asyncio.ensure_future(one("a", "low", -1)) for _ in range(10)]
        await asyncio.sleep(0)
        high = [asyncio.ensure_future(one("b", "high", 1)) for _ in range(3)]
        await clock.drive([*low, *high])

    asyncio.run(go())
    assert arrivals[:4] == ["low", "high", "high", "high"]  # the first low call went at once, before any high one
    assert arrivals[4:] == ["low"] * 9
