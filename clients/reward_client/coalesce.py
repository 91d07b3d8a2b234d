"""Client-side coalescing: many small calls from one process travel as a few batched HTTP requests.

Trainers call reward code once per sample (verl's reward loop, OpenRLHF's reward_func, TRL's concurrent async
reward functions); one request per sample costs a round trip and a server-side admission each. Calls are gathered
while they wait for a send slot: with fewer than ``max_inflight`` requests out, what has arrived is sent after
``window_s`` (``REWARD_CLIENT_COALESCE_WINDOW_MS``, default 1 ms); with every slot busy, arrivals accumulate until
one frees, so batches grow with load and a lone caller waits no more than the window. A request holds at most
``max_items`` items; one caller's items always travel together (a GRPO group stays in one request), and a caller
with more than ``max_items`` items is sent on its own, chunked as usual.

The batching runs on one private event loop thread per process, so sync callers in thread pools and async callers
on any event loop share it, and no httpx client is ever used from a loop it was not made on.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from reward_client.errors import RequestRejected
from reward_client.items import Payload, VerifyItem, to_wire
from reward_client.jobs import check_priority
from reward_client.protocol import ClientConfig, shift_loc
from reward_client.results import VerifyResult


class Poster(Protocol):
    """What a coalescer needs of a client: post a list of items to a route, and close. ``AsyncRewardClient`` is one;
    the coalescer is handed a way to make it (``Connect``), so this module never imports the client."""

    async def post_items(self, path: str, items: list[Any]) -> list[Any]: ...

    async def submit(self, items: Sequence[Any], *, priority: str = "normal", tags: Sequence[str] = (),
                     chunk_size: int | None = None) -> Any: ...  # a ``reward_client.jobs.Submission``

    async def aclose(self) -> None: ...


# (settings, requests in flight per instance) -> a client on the coalescer's loop
Connect = Callable[[ClientConfig, int], Poster]
WINDOW_ENV = "REWARD_CLIENT_COALESCE_WINDOW_MS"
DEFAULT_WINDOW_S = 0.001
T = TypeVar("T")
Send = Callable[[list[Any]], Awaitable[list[Any]]]
SendWith = Callable[[Any, list[Any]], Awaitable[list[Any]]]


def default_window_s() -> float:
    raw = os.environ.get(WINDOW_ENV)
    return float(raw) / 1000.0 if raw else DEFAULT_WINDOW_S


@dataclass
class _Entry:
    items: list[Any]
    future: asyncio.Future[list[Any]]


def _rejected_index(exc: RequestRejected) -> int | None:
    loc = exc.loc
    return loc[1] if loc and len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int) else None


class Batcher:
    """Gathers submissions on one event loop into requests of whole submissions, at most ``max_items`` items.

    A rejection naming one item fails only the submission holding it (with the index re-expressed as that caller's
    own); the other submissions are sent again without it.
    """

    def __init__(self, send: Send, window_s: float, max_items: int, max_inflight: int = 4) -> None:
        if max_items < 1 or window_s < 0 or max_inflight < 1:
            raise ValueError("max_items and max_inflight must be at least 1 and window_s not negative")
        self._send = send
        self.window_s = window_s
        self.max_items = max_items
        self.max_inflight = max_inflight
        self._inflight = 0
        self._pending: list[_Entry] = []
        self._count = 0
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set = set()
        self.requests = 0  # batched requests sent (retries of one request not counted)
        self.items = 0

    async def submit(self, items: list[Any]) -> list[Any]:
        if not items:
            return []
        loop = asyncio.get_running_loop()
        if len(items) >= self.max_items:  # a full request on its own: no reason to wait
            self.requests += 1
            self.items += len(items)
            return await self._send(items)
        if self._count + len(items) > self.max_items:
            self._flush()
        entry = _Entry(items, loop.create_future())
        self._pending.append(entry)
        self._count += len(items)
        if self._count >= self.max_items:
            self._flush()
        else:
            self._arm()
        return await entry.future

    def _arm(self) -> None:
        """Start the window when a send slot is free; with none free, the next finished send flushes instead."""
        if self._pending and self._timer is None and self._inflight < self.max_inflight:
            self._timer = asyncio.get_running_loop().call_later(self.window_s, self._flush)

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        entries, self._pending, self._count = self._pending, [], 0
        if entries:
            task = asyncio.get_running_loop().create_task(self._run(entries))
            self._tasks.add(task)  # keep a reference until done (the loop holds tasks weakly)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, entries: list[_Entry]) -> None:
        entries = [e for e in entries if not e.future.done()]  # a cancelled caller's items are not sent
        if not entries:
            return
        wire = [item for e in entries for item in e.items]
        self.requests += 1
        self.items += len(wire)
        self._inflight += 1
        try:
            results = await self._send(wire)
        except RequestRejected as exc:
            rejected: RequestRejected | None = exc
        except BaseException as exc:
            _fail(entries, exc)
            if not isinstance(exc, Exception):
                raise
            return
        else:
            rejected = None
        finally:
            self._inflight -= 1
            if self._pending and self._inflight < self.max_inflight:
                self._flush()  # what piled up while every slot was busy goes now
        if rejected is not None:
            await self._isolate(entries, rejected)
            return
        start = 0
        for e in entries:
            if not e.future.done():
                e.future.set_result(results[start:start + len(e.items)])
            start += len(e.items)

    async def _isolate(self, entries: list[_Entry], exc: RequestRejected) -> None:
        """Fail the submission holding the rejected item, in its own indices; send the others again."""
        bad = _rejected_index(exc)
        start = 0
        for i, e in enumerate(entries):
            if bad is not None and len(entries) > 1 and start <= bad < start + len(e.items):
                _fail([e], shift_loc(exc, -start))
                await self._run(entries[:i] + entries[i + 1:])
                return
            start += len(e.items)
        _fail(entries, exc)


def _fail(entries: Sequence[_Entry], exc: BaseException) -> None:
    for e in entries:
        if not e.future.done():
            e.future.set_exception(exc)


class LoopThread:
    """A private event loop on a daemon thread, restarted in a forked child (a loop never survives a fork)."""

    def __init__(self, name: str = "reward-client-coalescer") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(target=self._main, args=(loop, ready), name=self._name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    @staticmethod
    def _main(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()
        loop.close()

    def on_loop_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None and self._pid == os.getpid() and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)


class Coalescer:
    """Thread-safe front of a batcher per route, sharing one async client on a private loop thread.

    ``run``/``verify`` block the calling thread; ``arun``/``averify`` await from any event loop.
    """

    def __init__(self, config: ClientConfig, connect: Connect, *, window_s: float | None = None,
                 max_items: int | None = None, max_inflight: int | None = None) -> None:
        self.config = config
        self._connect = connect
        self.window_s = default_window_s() if window_s is None else window_s
        self.max_items = max_items or config.chunk_size
        self.max_inflight = max_inflight or config.max_concurrency
        self._thread = LoopThread()
        self._client: Poster | None = None
        self._batchers: dict[str, Batcher] = {}
        self._pid = 0

    # --- on the private loop ---
    def _client_here(self) -> Poster:
        if self._client is None or self._pid != os.getpid():
            self._client = self._connect(self.config, self.max_inflight)
            self._batchers = {}
            self._pid = os.getpid()
        return self._client

    async def _submit(self, route: str, items: list[Any], send: SendWith) -> list[Any]:
        client = self._client_here()
        batcher = self._batchers.get(route)
        if batcher is None:
            # ``max_inflight`` requests out per instance when the client has several (``reward_client.instances``)
            slots = self.max_inflight * len(self.config.urls)
            batcher = self._batchers[route] = Batcher(lambda batch: send(client, batch), self.window_s,
                                                      self.max_items, slots)
        return await batcher.submit(items)

    # --- from any thread or loop ---
    def _schedule(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._thread.on_loop_thread():
            coro.close()
            raise RuntimeError("a coalesced call cannot be made from the coalescer's own loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self._thread.loop())

    def run(self, route: str, items: list[Any], send: SendWith) -> list[Any]:
        return self._schedule(self._submit(route, items, send)).result()

    async def arun(self, route: str, items: list[Any], send: SendWith) -> list[Any]:
        return await asyncio.wrap_future(self._schedule(self._submit(route, items, send)))

    def verify(self, items: Sequence[VerifyItem | Payload]) -> list[VerifyResult]:
        return [VerifyResult.from_json(r) for r in self.run("verify", [to_wire(i) for i in items], _send_verify)]

    async def averify(self, items: Sequence[VerifyItem | Payload]) -> list[VerifyResult]:
        results = await self.arun("verify", [to_wire(i) for i in items], _send_verify)
        return [VerifyResult.from_json(r) for r in results]

    async def _job(self, items: list[Any], priority: str, tags: tuple[str, ...]) -> list[VerifyResult]:
        async def send(client: Any, wire: list[Any]) -> list[Any]:
            return await _send_job(client, wire, priority, tags)

        futures = await self._submit(f"jobs {priority} {json.dumps(tags)}", items, send)
        results: list[VerifyResult] = []
        for outcome in await asyncio.gather(*futures, return_exceptions=True):  # each future's outcome read
            if isinstance(outcome, BaseException):
                raise outcome
            results.append(outcome)
        return results

    def _job_call(self, items: Sequence[VerifyItem | Payload], priority: str,
                  tags: Sequence[str]) -> concurrent.futures.Future[list[VerifyResult]]:
        check_priority(priority)
        return self._schedule(self._job([to_wire(i) for i in items], priority, tuple(tags)))

    def verify_as_job(self, items: Sequence[VerifyItem | Payload], priority: str = "normal",
                      tags: Sequence[str] = ()) -> list[VerifyResult]:
        """``verify`` through jobs (``/v1/jobs``): the concurrent callers' items are gathered as ``verify`` gathers
        them, into one job per batch (per priority and tags), and each caller returns as soon as its own items'
        verdicts have streamed in, not when the whole batch is done."""
        return self._job_call(items, priority, tags).result()

    async def averify_as_job(self, items: Sequence[VerifyItem | Payload], priority: str = "normal",
                             tags: Sequence[str] = ()) -> list[VerifyResult]:
        return await asyncio.wrap_future(self._job_call(items, priority, tags))

    def stats(self) -> dict[str, int]:
        """Requests and items sent per route, counted at submission (retries of one request not counted)."""
        return {f"{route}_{k}": getattr(b, k) for route, b in self._batchers.items() for k in ("requests", "items")}

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._pid == os.getpid() and not self._thread.on_loop_thread():
            try:
                self._schedule(client.aclose()).result(timeout=10)
            except Exception:
                pass
        self._thread.stop()


async def _send_verify(client: Poster, wire: list[Any]) -> list[Any]:
    return await client.post_items("/v1/verify", wire)


async def _send_job(client: Poster, wire: list[Any], priority: str, tags: tuple[str, ...]) -> list[Any]:
    """Submit a batch as a job; its items' futures, resolved as the verdicts stream in. A job refused for one item
    (a 422 naming it) fails every future at once: that refusal is raised, so the batcher fails only the caller
    whose item it names and sends the others again, as it does for ``/v1/verify``."""
    submission = await client.submit(wire, priority=priority, tags=tags)
    futures: list[asyncio.Future[Any]] = submission.futures
    failed = [f.exception() for f in futures if f.done() and not f.cancelled()]
    for exc in failed:
        if isinstance(exc, RequestRejected):
            raise exc
    return futures
