"""Request and token rate limits of one judge backend, with the concurrency cap, shared fairly between requests.

Hosted judges refuse calls past a requests-per-minute (RPM) and a tokens-per-minute (TPM) budget. ``Window`` keeps
the exact account over a sliding window (every call granted in the last ``window_s`` seconds, with its tokens), so
no window of that length ever holds more than the limits; on top, calls are paced (GCRA) so a minute's allowance is
not sent in one burst that a provider enforcing per-second shares would refuse. A call's tokens are estimated
before it is sent and corrected from the ``usage`` the server returns. A Retry-After from the server pauses every
call of the backend, not only the one refused.

``RateLimiter`` hands out turns round-robin between clients, and within a client between its sources (the request each
call belongs to), each source first in first out: one request's thousand items cannot hold back another's few (the
turns are ``sandbox.api.FairTurns``'s, the policy the sandbox's slots and the verifier pool use too). The same
gate caps the calls in flight, so a call is counted when it is sent, not when it starts to wait for a connection. Time
comes from an injected clock, so tests drive the window exactly without sleeping.
"""
from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from sandbox.api import FairTurns

# Below this a wait is float noise (a clock advanced to an expiry can land a hair short of it).
_EPSILON_S = 1e-9


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class Limits:
    """What one backend may use. ``None`` means no limit of that kind."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    burst: int | None = None  # calls sent back to back before pacing starts; None: 1 (evenly spaced)
    max_concurrency: int | None = None
    window_s: float = 60.0

    @property
    def effective_burst(self) -> int | None:
        if self.requests_per_minute is None:
            return None
        return max(1, min(self.burst or 1, self.requests_per_minute))


@dataclass
class Grant:
    """One call let through: when, and the tokens it is charged (the estimate until ``settle``)."""

    at: float
    tokens: int
    live: bool = True  # still inside the window


class Window:
    """The sliding-window account and the pacing of one backend. Pure: every method is told the time."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._requests: deque[Grant] = deque()
        self._tokens = 0
        self._tat = -math.inf  # GCRA's theoretical arrival time of the next call
        self.paused_until = -math.inf

    @property
    def _interval(self) -> float:
        rpm = self.limits.requests_per_minute
        return self.limits.window_s / rpm if rpm else 0.0

    def expire(self, now: float) -> None:
        horizon = now - self.limits.window_s + _EPSILON_S  # the same tolerance as ``wait``: due is gone
        while self._requests and self._requests[0].at <= horizon:
            gone = self._requests.popleft()
            gone.live = False
            self._tokens -= gone.tokens

    def used(self, now: float) -> tuple[int, int]:
        """Calls and tokens charged in the window ending now."""
        self.expire(now)
        return len(self._requests), self._tokens

    def wait(self, now: float, tokens: int) -> float:
        """Seconds until a call of ``tokens`` may be sent (0: now)."""
        self.expire(now)
        window = self.limits.window_s
        waits = [self.paused_until - now]
        rpm = self.limits.requests_per_minute
        if rpm is not None:
            count = len(self._requests)
            if count >= rpm:  # wait for enough of the oldest calls to leave the window
                waits.append(self._requests[count - rpm].at + window - now)
            burst = self.limits.effective_burst or 1
            waits.append(self._tat - (burst - 1) * self._interval - now)
        tpm = self.limits.tokens_per_minute
        if tpm is not None and self._tokens + tokens > tpm:
            # A call larger than the whole budget goes alone, once the window is empty; else free just enough.
            excess = self._tokens if tokens > tpm else self._tokens + tokens - tpm
            freed = 0
            for grant in self._requests:
                freed += grant.tokens
                if freed >= excess:
                    waits.append(grant.at + window - now)
                    break
        wait = max(waits)
        return wait if wait > _EPSILON_S else 0.0

    def take(self, now: float, tokens: int) -> Grant:
        grant = Grant(now, tokens)
        self._requests.append(grant)
        self._tokens += tokens
        if self.limits.requests_per_minute is not None:
            self._tat = max(self._tat, now) + self._interval
        return grant

    def settle(self, grant: Grant, tokens: int) -> None:
        """Charge ``grant`` what the call really used (the server's usage)."""
        tokens = max(0, tokens)
        if grant.live:
            self._tokens += tokens - grant.tokens
        grant.tokens = tokens

    def pause(self, now: float, seconds: float) -> None:
        self.paused_until = max(self.paused_until, now + seconds)


@dataclass
class LimiterStats:
    """Totals since start, and the state now, for /metrics."""

    requests_per_minute: int | None
    tokens_per_minute: int | None
    max_concurrency: int | None
    requests: int = 0
    tokens: int = 0
    wait_s: float = 0.0
    pauses: int = 0
    waiting: int = 0
    in_flight: int = 0
    window_requests: int = 0
    window_tokens: int = 0
    paused_s: float = 0.0


@dataclass
class _Waiter:
    tokens: int
    since: float
    future: asyncio.Future[Grant] = field(repr=False)


class RateLimiter:
    """The gate every call of one backend passes: limits, pacing, Retry-After pauses and the concurrency cap,
    with turns taken round-robin between clients, then between their sources."""

    def __init__(self, limits: Limits, clock: Clock | None = None) -> None:
        self.limits = limits
        self.clock: Clock = clock or MonotonicClock()
        self.window = Window(limits)
        self._waiting: FairTurns[_Waiter] = FairTurns()
        self._in_flight = 0
        self._pump: asyncio.Task[None] | None = None
        self._changed: asyncio.Event | None = None
        self._stats = LimiterStats(limits.requests_per_minute, limits.tokens_per_minute, limits.max_concurrency)

    def stats(self) -> LimiterStats:
        now = self.clock.now()
        s = self._stats
        s.waiting = len(self._waiting)
        s.in_flight = self._in_flight
        s.window_requests, s.window_tokens = self.window.used(now)
        s.paused_s = max(0.0, self.window.paused_until - now)
        return s

    @asynccontextmanager
    async def slot(self, source: Hashable, tokens: int, client: Hashable | None = None,
                   priority: int = 0) -> AsyncIterator[Grant]:
        """Hold one call's turn: granted within the limits, released (for the concurrency cap) on exit."""
        grant = await self.acquire(source, tokens, client, priority)
        try:
            yield grant
        finally:
            self.release()

    async def acquire(self, source: Hashable, tokens: int, client: Hashable | None = None,
                      priority: int = 0) -> Grant:
        """Wait for the turn of ``source`` (a request) of ``client`` (default: a client of its own); a waiter of a
        higher ``priority`` goes first."""
        now = self.clock.now()
        if not self._waiting and self._free() and self.window.wait(now, tokens) == 0.0:
            return self._grant(now, tokens, now)
        waiter = _Waiter(tokens, now, asyncio.get_running_loop().create_future())
        self._waiting.push(waiter, source, client, priority)
        self._kick()
        try:
            return await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release()  # granted just as the caller gave up: the call is not made
            else:
                self._waiting.remove(waiter, source, client, priority)
                self._kick()
            raise

    def release(self) -> None:
        self._in_flight -= 1
        self._kick()

    def settle(self, grant: Grant, tokens: int) -> None:
        """Charge ``grant`` what the server says the call used."""
        before = grant.tokens
        self.window.settle(grant, tokens)
        self._stats.tokens += grant.tokens - before
        self._kick()

    def pause(self, seconds: float) -> None:
        """The server asked for a break (Retry-After): no call of this backend is sent before it ends."""
        self.window.pause(self.clock.now(), seconds)
        self._stats.pauses += 1
        self._kick()

    async def aclose(self, error: BaseException | None = None) -> None:
        """Stop serving turns; callers still waiting get ``error`` (default: a RuntimeError)."""
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
            self._pump = None
        for waiter in self._waiting.drain():
            if not waiter.future.done():
                waiter.future.set_exception(error or RuntimeError("rate gate closed"))

    def _free(self) -> bool:
        cap = self.limits.max_concurrency
        return cap is None or self._in_flight < cap

    def _grant(self, now: float, tokens: int, since: float) -> Grant:
        self._in_flight += 1
        self._stats.requests += 1
        self._stats.wait_s += now - since
        self._stats.tokens += tokens
        return self.window.take(now, tokens)

    def _head(self) -> _Waiter | None:
        while (head := self._waiting.peek()) is not None and head.future.done():  # cancelled while waiting
            self._waiting.pop(rotate=False)
        return head

    def _kick(self) -> None:
        if self._changed is not None:
            self._changed.set()
        if not self._waiting:
            return
        loop = asyncio.get_running_loop()
        if self._pump is None or self._pump.done() or self._pump.get_loop() is not loop:  # a new loop: a new pump
            self._changed = asyncio.Event()
            self._pump = loop.create_task(self._run(), name="judge-rate-limiter")

    async def _run(self) -> None:
        changed = self._changed
        assert changed is not None
        while True:
            changed.clear()
            waiter = self._head()
            if waiter is None:
                return
            now = self.clock.now()
            delay = self.window.wait(now, waiter.tokens) if self._free() else math.inf
            if delay == 0.0:
                self._waiting.pop()
                waiter.future.set_result(self._grant(now, waiter.tokens, waiter.since))
                continue
            await self._wait(changed, delay)

    async def _wait(self, changed: asyncio.Event, delay: float) -> None:
        """Until ``delay`` has passed or something changed (a call ended, a waiter left, usage came back)."""
        woken: asyncio.Future[object] = asyncio.ensure_future(changed.wait())
        tasks = {woken}
        if math.isfinite(delay):
            tasks.add(asyncio.ensure_future(self.clock.sleep(delay)))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
