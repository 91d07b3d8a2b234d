"""Several instances of the service behind one client: least-loaded dispatch, failover and probing back in.

Each request (a chunk of items, or any other call) goes to the healthy instance with the fewest items in flight
among those with a free slot (``max_concurrency`` requests each), chosen when it can start there rather than when it
was cut, so a slower instance gets fewer chunks; ties go in turn, so a caller sending one chunk at a time still
spreads its work. An instance fails when its connection fails (refused, reset, the process gone), when it times out,
or when it answers 502/504 (a proxy in front of a dead instance): it leaves the rotation, every chunk still in
flight there is sent again to another instance, and it is probed on ``/readyz`` with jittered backoff
(``RetryPolicy.base_delay_s`` doubling up to ``max_delay_s``) until it answers and rejoins. A 429 or 503 says the
instance is alive but busy (or restarting): the chunk goes to another instance at once (even when its Retry-After is
longer than the whole retry budget), and the busy one is left alone for what its Retry-After asked. An instance that
holds chunks but stops answering (a hung process, a frozen VM) is noticed by a watchdog, not by the request timeout
(which must be long enough for slow verifiers): while chunks are in flight there it is probed every ``stall_s``
(``REWARD_CLIENT_STALL_S``, 10 s), and a probe left unanswered for ``stall_s`` counts as a failure.

A chunk sent twice is answered once: the first answer wins and the other attempt is cancelled, so a slow instance
answering after its chunk was re-sent adds nothing. A chunk always travels whole to one instance, so a GRPO group
(which ``protocol.chunks`` never cuts) is scored whole by one instance. When no instance can take a chunk, the chunk
waits for one to come back (or for a busy one's Retry-After) and tries again, within the client's ``RetryPolicy``;
when that is spent, the usual named error (``ServiceUnavailable``, or ``ServiceUnreachable`` when no instance ever
answered) is raised with every URL in its message: an outage never becomes a score.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Sequence
from typing import Any, Union

import httpx

from reward_client.errors import ServiceUnavailable, ServiceUnreachable
from reward_client.protocol import ClientConfig, Contact, judge
from reward_client.retry import RETRY_STATUSES, parse_retry_after

log = logging.getLogger("reward_client")
PROBE_PATH = "/readyz"
PROBE_TIMEOUT_S = 5.0
STALL_ENV = "REWARD_CLIENT_STALL_S"
DEFAULT_STALL_S = 10.0
# answers that mean "nothing behind this address right now" (a gateway in front of a dead instance)
DEAD_STATUSES = frozenset({502, 504})
Attempt = Union[httpx.Response, BaseException]


def weight_of(body: Any) -> int:
    """Items a request carries: its ``items`` (or OpenRLHF's ``query``) list, else 1."""
    if isinstance(body, dict):
        for key in ("items", "query"):
            value = body.get(key)
            if isinstance(value, list):
                return max(len(value), 1)
    return 1


class _QuietContact(Contact):
    """Records that the URL answered (which decides how a refused connection is judged) without the single-URL
    outage lines: the pool tells instances leaving and rejoining the rotation itself."""

    def failed(self, reason: str, urgent: bool, window_s: float) -> None:
        return None


class Instance:
    """One base URL: its connections, its load and whether it is in the rotation."""

    def __init__(self, url: str, index: int, config: ClientConfig, transport: Any, max_inflight: int) -> None:
        self.url = url
        self.index = index
        kwargs = {**config.http_kwargs(), "base_url": url}
        limits = httpx.Limits(max_connections=max(max_inflight * 2, 10))
        self.http = httpx.AsyncClient(transport=transport, limits=limits, **kwargs)
        self.contact = _QuietContact(url, config.retry)
        self.max_inflight = max_inflight
        self.active = 0  # requests in flight here
        self.inflight_items = 0  # items of those requests
        self.down = False
        self.down_since = 0.0
        self.busy_until = 0.0
        self._gone: asyncio.Event | None = None  # set when the instance leaves the rotation
        self.requests = 0  # answered requests (any status)
        self.items = 0  # items of requests answered 2xx
        self.failures = 0  # times it left the rotation
        self.resent = 0  # chunks that were in flight here when it left, sent again elsewhere

    def gone(self) -> asyncio.Event:
        if self._gone is None:
            self._gone = asyncio.Event()
        return self._gone

    def available(self, now: float) -> bool:
        """In the rotation, not asked to wait (Retry-After), and with a free slot."""
        return not self.down and self.busy_until <= now and self.active < self.max_inflight

    def stats(self) -> dict[str, Any]:
        return {"url": self.url, "down": self.down, "inflight_items": self.inflight_items, "requests": self.requests,
                "items": self.items, "failures": self.failures, "resent": self.resent}


def check_urls(urls: Sequence[str]) -> None:
    """Refuse a list with an entry that is no http(s) URL when the client is made: in a list, a wrong entry would
    otherwise just leave the rotation while the others carry on."""
    wrong = [u for u in urls if not u.lower().startswith(("http://", "https://"))]
    if wrong:
        raise ValueError(f"every base URL must start with http:// or https://; not {', '.join(map(repr, wrong))}")


def _healthy(racing: dict[Any, Instance]) -> bool:
    """Whether an attempt still in flight is at an instance in the rotation (so no other copy is needed yet)."""
    return any(not i.down for i in racing.values())


class Pool:
    """The instances of one async client, on the event loop it is used from."""

    def __init__(self, urls: Sequence[str], config: ClientConfig, transport: Any = None) -> None:
        if len(urls) < 2:
            raise ValueError("a pool needs at least two URLs")
        check_urls(urls)
        self.config = config
        self.instances = [Instance(u, k, config, transport, config.max_concurrency) for k, u in enumerate(urls)]
        self._turn = 0
        self._back: asyncio.Event | None = None  # set (and replaced) whenever an instance rejoins
        self._freed: asyncio.Event | None = None  # set (and replaced) whenever a request ends, freeing a slot
        self._probes: dict[int, asyncio.Task[None]] = {}
        self._watches: dict[int, asyncio.Task[None]] = {}
        self.stall_s = float(os.environ.get(STALL_ENV) or DEFAULT_STALL_S)

    # --- choosing ---
    def _pick(self, exclude: set[int], force: bool = False) -> Instance | None:
        """The least-loaded available instance not in ``exclude``; with ``force``, any instance not in ``exclude``
        (all are down or busy: one of them is tried again, as a single URL would be)."""
        now = time.monotonic()
        pool = [i for i in self.instances if i.index not in exclude]
        ready = [i for i in pool if i.available(now)]
        candidates = ready or (pool if force else [])
        if not candidates:
            return None
        n = len(self.instances)
        chosen = min(candidates, key=lambda i: (i.inflight_items, (i.index - self._turn) % n))
        self._turn = (chosen.index + 1) % n
        return chosen

    def _back_event(self) -> asyncio.Event:
        if self._back is None:
            self._back = asyncio.Event()
        return self._back

    def _freed_event(self) -> asyncio.Event:
        if self._freed is None:
            self._freed = asyncio.Event()
        return self._freed

    # --- health ---
    def _leave(self, inst: Instance, reason: str) -> None:
        if inst.down:
            return
        inst.down = True
        inst.down_since = time.monotonic()
        inst.failures += 1
        inst.gone().set()
        others = [i.url for i in self.instances if not i.down]
        log.warning("instance %s out of rotation (%s); %s", inst.url, reason,
                    f"its chunks go to {', '.join(others)}" if others else "no instance left in rotation")
        self._background(self._probes, inst, self._probe(inst))

    def _rejoin(self, inst: Instance) -> None:
        if not inst.down:
            return
        inst.down = False
        inst.busy_until = 0.0
        inst._gone = asyncio.Event()
        log.info("instance %s back in rotation after %.1f s", inst.url, time.monotonic() - inst.down_since)
        back = self._back_event()
        self._back = asyncio.Event()
        back.set()

    @staticmethod
    def _background(tasks: dict[int, asyncio.Task[None]], inst: Instance, coro: Any) -> None:
        """Run ``coro`` for ``inst`` unless one of its kind already runs; the table forgets it when it ends."""
        running = tasks.get(inst.index)
        if running is not None and not running.done():
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        tasks[inst.index] = task

        def forget(done: asyncio.Task[None]) -> None:
            if tasks.get(inst.index) is done:
                del tasks[inst.index]

        task.add_done_callback(forget)

    async def _watch(self, inst: Instance) -> None:
        """While chunks are in flight at ``inst``, check every ``stall_s`` that it still answers ``/readyz``."""
        while inst.inflight_items > 0 and not inst.down:
            await asyncio.sleep(self.stall_s)
            if inst.inflight_items <= 0 or inst.down:
                return
            try:
                await inst.http.get(PROBE_PATH, timeout=self.stall_s)
            except httpx.TimeoutException:
                self._leave(inst, f"no answer to {PROBE_PATH} within {self.stall_s:g} s while holding chunks")
            except httpx.TransportError as exc:
                self._leave(inst, f"{PROBE_PATH}: {type(exc).__name__}: {exc}".rstrip(": "))

    async def _probe(self, inst: Instance) -> None:
        policy = self.config.retry
        delay = policy.base_delay_s
        while inst.down:
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            try:
                answer = await inst.http.get(PROBE_PATH, timeout=PROBE_TIMEOUT_S)
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code == 200:
                self._rejoin(inst)
                return
            delay = min(delay * 2, policy.max_delay_s)

    # --- sending ---
    async def _attempt(self, inst: Instance, method: str, path: str, json: Any, weight: int) -> Attempt:
        try:
            try:
                answer = await inst.http.request(method, path, json=json)
            except httpx.TransportError as exc:
                self._failed(inst, exc)
                return exc
            inst.requests += 1
            if answer.status_code < 300:
                inst.items += weight
            elif answer.status_code in RETRY_STATUSES:
                self._failed(inst, answer)
            return answer
        finally:
            inst.active -= 1
            inst.inflight_items -= weight
            freed, self._freed = self._freed_event(), None
            freed.set()

    def _start(self, inst: Instance, method: str, path: str, json: Any, weight: int) -> asyncio.Task[Attempt]:
        inst.active += 1
        inst.inflight_items += weight
        self._background(self._watches, inst, self._watch(inst))
        return asyncio.get_running_loop().create_task(self._attempt(inst, method, path, json, weight))

    def _failed(self, inst: Instance, outcome: Attempt) -> None:
        """Take a failed instance out of the rotation, or leave a busy one alone for what it asked, as soon as the
        answer arrives (before any other chunk is placed)."""
        if isinstance(outcome, httpx.Response) and outcome.status_code not in DEAD_STATUSES:
            wait = self.config.retry.delay(1, parse_retry_after(outcome.headers.get("retry-after")))
            inst.busy_until = max(inst.busy_until, time.monotonic() + wait)
            return
        reason = (f"answered {outcome.status_code}" if isinstance(outcome, httpx.Response)
                  else f"{type(outcome).__name__}: {outcome}".rstrip(": "))
        self._leave(inst, reason)

    async def request(self, method: str, path: str, json: Any = None) -> Any:
        """The decoded answer of one call, from whichever instance answers first; see the module docstring."""
        return (await self.placed(method, path, json))[0]

    async def placed(self, method: str, path: str, json: Any = None) -> tuple[Any, Instance]:
        """``request``'s answer and the instance that gave it (where a session it opened lives).

        An instance is chosen when the request can start there (a free slot), not before, so a chunk waiting for a
        slot goes to whichever instance frees one first.
        """
        weight = weight_of(json)
        policy = self.config.retry
        started = time.monotonic()
        attempt = 0
        racing: dict[asyncio.Task[Attempt], Instance] = {}
        need_send, force, wait = True, False, 0.0
        pause: asyncio.Task[bool] | None = None  # waiting for a slot, a rejoin or a Retry-After; or a backoff
        try:
            while True:
                if need_send and pause is None:
                    exclude = {i.index for i in racing.values()}
                    inst = self._pick(exclude, force)
                    if inst is not None:
                        attempt += 1
                        racing[self._start(inst, method, path, json, weight)] = inst
                        need_send = force = False
                    elif any(not i.down for i in self.instances if i.index not in exclude):
                        pause = asyncio.ensure_future(self._slot(exclude))
                    elif len(racing) < len(self.instances) and not _healthy(racing):
                        pause = asyncio.ensure_future(self._backoff(wait))
                waits: set[asyncio.Future[Any]] = set(racing)
                watchers = {asyncio.ensure_future(i.gone().wait()): i for i in racing.values() if not i.down}
                waits.update(watchers)
                if pause is not None:
                    waits.add(pause)
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for w in watchers:
                    w.cancel()
                if pause is not None and pause in done:
                    force = pause.result()  # after a backoff, a down instance is tried if nothing else
                    pause = None
                left = [i for w, i in watchers.items() if w in done]
                if left and not need_send and not _healthy(racing):
                    need_send = True  # the instance holding this chunk left: send it elsewhere too
                    left[0].resent += 1
                for task in [t for t in racing if t in done]:
                    inst = racing.pop(task)
                    outcome = task.result()
                    try:
                        verdict = judge(outcome, attempt, policy, path, time.monotonic() - started, inst.contact)
                    except ServiceUnavailable as exc:
                        # this instance alone would give up (its Retry-After overruns the budget, or it never
                        # answered); another instance may still take the chunk within the budget
                        if racing:
                            continue  # another attempt may still answer
                        if not self._elsewhere(inst, attempt, time.monotonic() - started):
                            raise self._all_failed(exc) from exc
                        need_send, wait = True, 0.0
                        continue
                    if isinstance(outcome, httpx.Response) and outcome.status_code < 300:
                        return verdict, inst
                    wait = verdict
                    if not need_send and not _healthy(racing):
                        need_send = True
                        inst.resent += 1
        finally:
            for task in racing:
                task.cancel()
            if pause is not None:
                pause.cancel()

    def _elsewhere(self, inst: Instance, attempt: int, elapsed_s: float) -> bool:
        """Whether the budget still allows a try and another instance is in the rotation and not busy."""
        policy = self.config.retry
        if elapsed_s >= policy.budget_s or (policy.attempts is not None and attempt >= policy.attempts):
            return False
        now = time.monotonic()
        return any(not i.down and i.busy_until <= now for i in self.instances if i is not inst)

    async def _slot(self, exclude: set[int]) -> bool:
        """Until a request ends somewhere (a slot frees), an instance rejoins, or a busy instance's Retry-After
        ends; False: pick as usual afterwards."""
        now = time.monotonic()
        busy = [i.busy_until - now for i in self.instances
                if i.index not in exclude and not i.down and i.busy_until > now]
        waits = [asyncio.ensure_future(self._freed_event().wait()), asyncio.ensure_future(self._back_event().wait())]
        try:
            await asyncio.wait(waits, timeout=min(busy) if busy else None, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        return False

    async def _backoff(self, wait: float) -> bool:
        """Every instance is out of the rotation: up to ``wait`` seconds (a retry's backoff), cut short when one
        rejoins; True: try again, a down instance if none rejoined."""
        try:
            await asyncio.wait_for(self._back_event().wait(), timeout=max(wait, 0.0))
        except asyncio.TimeoutError:
            pass
        return True

    def _all_failed(self, exc: ServiceUnavailable) -> ServiceUnavailable:
        urls = ", ".join(i.url for i in self.instances)
        last = str(exc.args[0]).rsplit(" (after ", 1)[0]
        message = f"no instance could answer (all {len(self.instances)} tried: {urls}); last: {last}"
        if isinstance(exc, ServiceUnreachable):
            return ServiceUnreachable(message, exc.attempts, exc.status_code)
        return ServiceUnavailable(message, exc.attempts, exc.status_code)

    async def ready(self) -> bool:
        """True when at least one instance says it is ready."""
        for inst in self.instances:
            try:
                if (await inst.http.get(PROBE_PATH, timeout=PROBE_TIMEOUT_S)).status_code == 200:
                    return True
            except httpx.TransportError:
                continue
        return False

    def stats(self) -> list[dict[str, Any]]:
        return [i.stats() for i in self.instances]

    async def aclose(self) -> None:
        tasks = [*self._probes.values(), *self._watches.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for inst in self.instances:
            await inst.http.aclose()
