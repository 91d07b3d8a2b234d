"""Sync and async clients for reward-service.

Large batches are cut into chunks (results come back in the caller's order); overload and connection trouble are
retried with jittered backoff honouring Retry-After, for minutes by default (a restart of the service is ridden out,
told in the ``reward_client`` log); a URL that never answered is reported within seconds (``ServiceUnreachable``);
bad input raises ``RequestRejected`` with the server's message. A null score stays null: whether it means "skip" or
"0" is the caller's decision. With ``coalesce=True``, concurrent ``verify`` calls (threads, tasks) share batched
requests (see ``reward_client.coalesce``).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import httpx

from reward_client.coalesce import Coalescer, LoopThread
from reward_client.errors import RequestRejected
from reward_client.instances import Pool, check_urls
from reward_client.items import Payload, PrmItem, SandboxRun, VerifyItem, to_wire
from reward_client.jobs import Submission, check_priority, run_jobs
from reward_client.protocol import (
    ClientConfig,
    Contact,
    Outcome,
    Timeout,
    Urls,
    chunks,
    judge,
    split_point,
    splittable,
    unsplittable,
)
from reward_client.results import PrmResult, SandboxResult, VerifyResult
from reward_client.retry import RetryPolicy

T = TypeVar("T")
BodyOf = Callable[[list[dict[str, Any]]], dict[str, Any]]
# chunks a blocking client given several URLs keeps in flight at each instance (sent from a private loop thread)
SYNC_PER_INSTANCE = 2


def _items_body(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"items": items}


def _prm_body(model: str, aggregation: str, threshold: float | None, split: Any) -> BodyOf:
    def body(items: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"model": model, "items": items, "aggregation": aggregation}
        if threshold is not None:
            out["threshold"] = threshold
        if split is not None:
            out["split"] = split
        return out

    return body


def _run_item(code_or_run: str | Payload, language: str, kw: dict[str, Any]) -> dict[str, Any]:
    run = SandboxRun(code=code_or_run, language=language, **kw) if isinstance(code_or_run, str) else code_or_run
    return to_wire(run)


def _results(body: Any, n: int, path: str) -> list[dict[str, Any]]:
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list) or len(results) != n:
        got = len(results) if isinstance(results, list) else "no"
        raise RequestRejected(200, f"expected {n} results, got {got}", None, path)
    return results


def connect(config: ClientConfig, max_inflight: int) -> AsyncRewardClient:
    """The async client a coalescer sends through, made on its loop thread."""
    return AsyncRewardClient(config.base_url, token=config.token, timeout=config.timeout, retry=config.retry,
                             chunk_size=config.chunk_size, max_concurrency=max_inflight, headers=config.headers)


_shared: dict[tuple[Any, ...], Coalescer] = {}
_shared_lock = threading.Lock()


def shared_coalescer(config: ClientConfig) -> Coalescer:
    """One coalescer per process and client settings, so independent callers (several TRL reward functions,
    verl's samples) with the same settings merge into the same requests."""
    key = (os.getpid(), config.base_url, config.token, config.retry, repr(config.timeout), config.chunk_size,
           config.max_concurrency, tuple(sorted(config.headers.items())))
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Coalescer(config, connect)
        return _shared[key]


def _mirror(out: concurrent.futures.Future[Any], fut: asyncio.Future[Any]) -> None:
    """Copy an asyncio future's outcome (on the client's loop thread) to a thread-safe one."""
    if fut.cancelled():
        out.cancel()
    elif fut.exception() is not None:
        out.set_exception(fut.exception())
    else:
        out.set_result(fut.result())


def _coalescer(config: ClientConfig, coalesce: bool, window_s: float | None, transport: Any) -> Coalescer | None:
    """Coalescing sends from a private loop thread with its own connections, so a custom transport rules it out.
    Up to 4 batched requests are in flight (the sync client's own calls are one at a time per thread)."""
    if not coalesce:
        return None
    if transport is not None:
        raise ValueError("coalesce=True cannot use a custom transport")
    return Coalescer(config, connect, window_s=window_s, max_inflight=max(config.max_concurrency, 4))


class RewardClient:
    """Blocking client; one connection pool, safe to share between threads.

    Given several base URLs (a list, or one string with commas), chunks are spread over the instances
    (``reward_client.instances``), up to ``SYNC_PER_INSTANCE`` chunks in flight at each, from a private loop thread.
    """

    def __init__(
        self,
        base_url: Urls = None,
        *,
        token: str | None = None,
        timeout: Timeout = 180.0,
        retry: RetryPolicy | None = None,
        chunk_size: int = 256,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        coalesce: bool = False,
        coalesce_window_s: float | None = None,
    ) -> None:
        self.config = ClientConfig.given(base_url, token, timeout, retry, chunk_size, 1, headers)
        self.coalescer = _coalescer(self.config, coalesce, coalesce_window_s, transport)
        self._several = len(self.config.urls) > 1
        self._multi: AsyncRewardClient | None = None  # made on first use, again in a forked child
        self._multi_pid = 0
        self._multi_lock = threading.Lock()
        self._loop = LoopThread("reward-client-instances")
        if self._several:
            check_urls(self.config.urls)
            if transport is not None:
                raise ValueError("a custom transport serves one URL; give one base_url, or none")
        self._http = httpx.Client(transport=transport, **{**self.config.http_kwargs(), "base_url": self.config.urls[0]})
        self._contact = Contact(self.config.base_url, self.config.retry)

    def _pooled(self) -> AsyncRewardClient:
        """The async client that spreads this client's calls over its instances, living on the private loop."""
        with self._multi_lock:
            if self._multi is None or self._multi_pid != os.getpid():
                c = self.config
                self._multi = AsyncRewardClient(c.base_url, token=c.token, timeout=c.timeout, retry=c.retry,
                                                chunk_size=c.chunk_size, max_concurrency=SYNC_PER_INSTANCE,
                                                headers=c.headers)
                self._multi_pid = os.getpid()
            return self._multi

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop.loop()).result()

    def instance_stats(self) -> list[dict[str, Any]]:
        """Per instance: URL, whether it is out of the rotation, requests and items it answered, failures and chunks
        re-sent elsewhere; empty for a client of one URL."""
        return self._multi.instance_stats() if self._multi is not None else []

    # --- plumbing ---
    def _request(self, method: str, path: str, json: Any = None) -> Any:
        if self._several:
            return self._on_loop(self._pooled().request_json(method, path, json))
        policy = self.config.retry
        attempt = 0
        started = time.monotonic()
        while True:
            attempt += 1
            try:
                outcome: Outcome = self._http.request(method, path, json=json)
            except httpx.TransportError as exc:
                outcome = exc
            verdict = judge(outcome, attempt, policy, path, time.monotonic() - started, self._contact)
            if not isinstance(outcome, httpx.Response) or outcome.status_code >= 300:
                time.sleep(verdict)
                continue
            return verdict

    def _post_items(self, path: str, items: list[dict[str, Any]], body_of: BodyOf, offset: int = 0) -> list[Any]:
        try:
            return _results(self._request("POST", path, body_of(items)), len(items), path)
        except RequestRejected as exc:
            half = split_point(items) if splittable(exc, items) else None
            if half is None:
                raise unsplittable(exc, items, offset) from None
        return (self._post_items(path, items[:half], body_of, offset)
                + self._post_items(path, items[half:], body_of, offset + half))

    def _post_chunked(self, path: str, items: Sequence[Payload], body_of: BodyOf) -> list[Any]:
        if self._several:
            return self._on_loop(self._pooled().post_chunked(path, items, body_of))
        wire = [to_wire(i) for i in items]
        out: list[Any] = []
        for offset, chunk in chunks(wire, self.config.chunk_size):
            out.extend(self._post_items(path, list(chunk), body_of, offset))
        return out

    # --- endpoints ---
    def verify(self, items: Sequence[VerifyItem | Payload]) -> list[VerifyResult]:
        """Check any number of items; one result per item, in order."""
        if self.coalescer is not None:
            return self.coalescer.verify(items)
        return [VerifyResult.from_json(r) for r in self._post_chunked("/v1/verify", items, _items_body)]

    def verify_one(self, verifier: str, response: str, reference: Any = None,
                   options: dict[str, Any] | None = None) -> VerifyResult:
        return self.verify([VerifyItem(verifier, response, reference, options or {})])[0]

    def scores(self, verifier: str, responses: Sequence[str], references: Sequence[Any] | None = None,
               options: dict[str, Any] | None = None) -> list[float | None]:
        """Only the scores, None where no verdict could be reached."""
        refs = references if references is not None else [None] * len(responses)
        items = [VerifyItem(verifier, r, ref, options or {}) for r, ref in zip(responses, refs)]
        return [r.score for r in self.verify(items)]

    def prm_score(self, model: str, items: Sequence[PrmItem | Payload], aggregation: str = "min",
                  threshold: float | None = None, split: Any = None) -> list[PrmResult]:
        """Step scores of a process reward model; ``threshold``/``split`` default to the server's."""
        body = _prm_body(model, aggregation, threshold, split)
        return [PrmResult.from_json(r) for r in self._post_chunked("/v1/prm/score", items, body)]

    def sandbox_run(self, code: str | SandboxRun, language: str = "python", **kw: Any) -> SandboxResult:
        """Run one program; ``kw`` takes ``stdin``, ``args``, ``files``, ``collect``, ``limits``."""
        return SandboxResult.from_json(self._request("POST", "/v1/sandbox/run", _run_item(code, language, kw)))

    def sandbox_run_many(self, runs: Sequence[SandboxRun | Payload]) -> list[SandboxResult]:
        """Many programs through ``/v1/sandbox/run_batch``, chunked, results in order."""
        return [SandboxResult.from_json(r) for r in self._post_chunked("/v1/sandbox/run_batch", runs, _items_body)]

    def verifiers(self) -> list[dict[str, Any]]:
        body = self._request("GET", "/v1/verifiers")
        return body.get("verifiers", body) if isinstance(body, dict) else body

    def ready(self) -> bool:
        """True when the service (with several URLs: at least one instance) says it is ready."""
        pool = self._pooled().pool if self._several else None
        if pool is not None:
            return self._on_loop(pool.ready())
        try:
            return self._http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def submit(self, items: Sequence[VerifyItem | Payload], *, priority: str = "normal", tags: Sequence[str] = (),
               chunk_size: int | None = None) -> Submission:
        """Score ``items`` as jobs (``/v1/jobs``) over this client's instances; returns once they are accepted, with
        one ``concurrent.futures.Future`` per item that resolves as its verdict streams in, so the caller goes on
        (generating) meanwhile. ``priority``: high, normal or low; ``tags`` label the jobs (a step, a run) for a
        delete by tag. ``submission.cancel()`` deletes them."""
        async def go() -> tuple[Submission, list[concurrent.futures.Future[VerifyResult]]]:
            sub = await self._pooled().submit(items, priority=priority, tags=tags, chunk_size=chunk_size)
            mirrored: list[concurrent.futures.Future[VerifyResult]] = []
            for fut in sub.futures:
                out: concurrent.futures.Future[VerifyResult] = concurrent.futures.Future()
                fut.add_done_callback(functools.partial(_mirror, out))
                mirrored.append(out)
            return sub, mirrored

        sub, mirrored = self._on_loop(go())
        return Submission(mirrored, sub.jobs, lambda: self._on_loop(sub.cancel()))

    def close(self) -> None:
        if self.coalescer is not None:
            self.coalescer.close()
        multi, self._multi = self._multi, None
        if multi is not None and self._multi_pid == os.getpid():
            self._on_loop(multi.aclose())
        self._loop.stop()
        self._http.close()

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRewardClient:
    """Asyncio client; chunks of one call are sent concurrently (``max_concurrency`` at once).

    Given several base URLs (a list, or one string with commas), each chunk goes to the least-loaded healthy
    instance, ``max_concurrency`` chunks in flight at each (``reward_client.instances``).
    """

    def __init__(
        self,
        base_url: Urls = None,
        *,
        token: str | None = None,
        timeout: Timeout = 180.0,
        retry: RetryPolicy | None = None,
        chunk_size: int = 256,
        max_concurrency: int = 4,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        coalesce: bool = False,
        coalesce_window_s: float | None = None,
    ) -> None:
        self.config = ClientConfig.given(base_url, token, timeout, retry, chunk_size, max_concurrency, headers)
        self.coalescer = _coalescer(self.config, coalesce, coalesce_window_s, transport)
        urls = self.config.urls
        self.pool = Pool(urls, self.config, transport) if len(urls) > 1 else None
        limits = httpx.Limits(max_connections=max(max_concurrency * 2, 10))
        self._http = httpx.AsyncClient(transport=transport, limits=limits,
                                       **{**self.config.http_kwargs(), "base_url": urls[0]})
        self._contact = Contact(self.config.base_url, self.config.retry)
        self._gate: asyncio.Semaphore | None = None  # made on first use, inside the caller's event loop
        self._instances: dict[str, AsyncRewardClient] = {}  # one client per URL, for jobs (``_single``)
        self._jobs: set[asyncio.Future[None]] = set()  # submissions still reading their streams

    async def _request(self, method: str, path: str, json: Any = None) -> Any:
        if self.pool is not None:
            if self._gate is None:  # as many requests as the instances have slots; the rest wait here, in order
                self._gate = asyncio.Semaphore(self.config.max_concurrency * len(self.pool.instances))
            async with self._gate:
                return await self.pool.request(method, path, json)
        policy = self.config.retry
        attempt = 0
        started = time.monotonic()
        while True:
            attempt += 1
            if self._gate is None:
                self._gate = asyncio.Semaphore(self.config.max_concurrency)
            try:
                async with self._gate:
                    outcome: Outcome = await self._http.request(method, path, json=json)
            except httpx.TransportError as exc:
                outcome = exc
            verdict = judge(outcome, attempt, policy, path, time.monotonic() - started, self._contact)
            if not isinstance(outcome, httpx.Response) or outcome.status_code >= 300:
                await asyncio.sleep(verdict)
                continue
            return verdict

    async def _post_items(self, path: str, items: list[dict[str, Any]], body_of: BodyOf, offset: int = 0) -> list[Any]:
        try:
            return _results(await self._request("POST", path, body_of(items)), len(items), path)
        except RequestRejected as exc:
            half = split_point(items) if splittable(exc, items) else None
            if half is None:
                raise unsplittable(exc, items, offset) from None
        first, second = await asyncio.gather(
            self._post_items(path, items[:half], body_of, offset),
            self._post_items(path, items[half:], body_of, offset + half),
        )
        return first + second

    async def request_json(self, method: str, path: str, json: Any = None) -> Any:
        """One call to any route with the client's retries; the decoded JSON answer."""
        return await self._request(method, path, json)

    async def post_items(self, path: str, items: Sequence[Payload]) -> list[Any]:
        """The raw result objects of an ``{"items": [...]}`` endpoint, chunked, in order."""
        return await self._post_chunked(path, items, _items_body)

    async def post_chunked(self, path: str, items: Sequence[Payload], body_of: BodyOf) -> list[Any]:
        """Chunks of ``items``, each in the body ``body_of`` makes, sent concurrently; the results in order."""
        return await self._post_chunked(path, items, body_of)

    def instance_stats(self) -> list[dict[str, Any]]:
        """Per instance: URL, whether it is out of the rotation, requests and items it answered, failures and chunks
        re-sent elsewhere; empty for a client of one URL."""
        return self.pool.stats() if self.pool is not None else []

    async def _post_chunked(self, path: str, items: Sequence[Payload], body_of: BodyOf) -> list[Any]:
        wire = [to_wire(i) for i in items]
        parts = await asyncio.gather(*(
            self._post_items(path, list(chunk), body_of, offset)
            for offset, chunk in chunks(wire, self.config.chunk_size)
        ))
        return [r for part in parts for r in part]

    async def verify(self, items: Sequence[VerifyItem | Payload]) -> list[VerifyResult]:
        if self.coalescer is not None:
            return await self.coalescer.averify(items)
        return [VerifyResult.from_json(r) for r in await self._post_chunked("/v1/verify", items, _items_body)]

    async def verify_one(self, verifier: str, response: str, reference: Any = None,
                         options: dict[str, Any] | None = None) -> VerifyResult:
        return (await self.verify([VerifyItem(verifier, response, reference, options or {})]))[0]

    async def scores(self, verifier: str, responses: Sequence[str], references: Sequence[Any] | None = None,
                     options: dict[str, Any] | None = None) -> list[float | None]:
        refs = references if references is not None else [None] * len(responses)
        items = [VerifyItem(verifier, r, ref, options or {}) for r, ref in zip(responses, refs)]
        return [r.score for r in await self.verify(items)]

    async def prm_score(self, model: str, items: Sequence[PrmItem | Payload], aggregation: str = "min",
                        threshold: float | None = None, split: Any = None) -> list[PrmResult]:
        body = _prm_body(model, aggregation, threshold, split)
        return [PrmResult.from_json(r) for r in await self._post_chunked("/v1/prm/score", items, body)]

    async def sandbox_run(self, code: str | SandboxRun, language: str = "python", **kw: Any) -> SandboxResult:
        body = await self._request("POST", "/v1/sandbox/run", _run_item(code, language, kw))
        return SandboxResult.from_json(body)

    async def sandbox_run_many(self, runs: Sequence[SandboxRun | Payload]) -> list[SandboxResult]:
        """Many programs through ``/v1/sandbox/run_batch``, chunks in flight concurrently, results in order."""
        results = await self._post_chunked("/v1/sandbox/run_batch", runs, _items_body)
        return [SandboxResult.from_json(r) for r in results]

    async def verifiers(self) -> list[dict[str, Any]]:
        body = await self._request("GET", "/v1/verifiers")
        return body.get("verifiers", body) if isinstance(body, dict) else body

    @contextlib.asynccontextmanager
    async def stream_lines(self, path: str, params: dict[str, Any]) -> AsyncIterator[tuple[int, AsyncIterator[str]]]:
        """A streamed GET of this client's first URL: its status and its lines (no read timeout: a stream waits for
        verdicts as long as they take)."""
        timeout = httpx.Timeout(self._http.timeout.connect or 30.0, read=None)
        async with self._http.stream("GET", path, params=params, timeout=timeout) as response:
            yield response.status_code, response.aiter_lines()

    def _single(self, url: str) -> AsyncRewardClient:
        """A client of one of this client's URLs (a job's results are read where it was accepted)."""
        if len(self.config.urls) == 1:
            return self
        one = self._instances.get(url)
        if one is None:
            c = self.config
            one = self._instances[url] = AsyncRewardClient(url, token=c.token, timeout=c.timeout, retry=c.retry,
                                                           chunk_size=c.chunk_size, headers=c.headers)
        return one

    async def submit(self, items: Sequence[VerifyItem | Payload], *, priority: str = "normal",
                     tags: Sequence[str] = (), chunk_size: int | None = None) -> Submission:
        """Score ``items`` as jobs; returns once they are accepted, with one ``asyncio.Future`` per item that
        resolves as its verdict streams in (``reward_client.jobs``). ``priority``: high, normal or low."""
        check_priority(priority)
        wire = [to_wire(i) for i in items]
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[VerifyResult]] = [loop.create_future() for _ in wire]
        jobs: list[tuple[str, str]] = []

        def deliver(i: int, result: VerifyResult) -> None:
            if not futures[i].done():
                futures[i].set_result(result)

        def fail(i: int, exc: BaseException) -> None:
            if not futures[i].done():
                futures[i].set_exception(exc)

        accepted = asyncio.Event()
        instances = [self._single(u) for u in self.config.urls]
        task = asyncio.ensure_future(run_jobs(instances, wire, chunk_size or self.config.chunk_size, priority,
                                              list(tags), deliver, fail, jobs, accepted))
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)
        waiter = asyncio.ensure_future(accepted.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()

        async def cancel() -> None:
            for url, job in list(jobs):
                await self._single(url).request_json("DELETE", f"/v1/jobs/{job}")

        return Submission(list(futures), jobs, cancel)

    async def aclose(self) -> None:
        for task in list(self._jobs):
            task.cancel()
        for one in self._instances.values():
            await one.aclose()
        if self.coalescer is not None:
            await asyncio.to_thread(self.coalescer.close)
        if self.pool is not None:
            await self.pool.aclose()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRewardClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
