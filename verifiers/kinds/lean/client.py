"""An async client of a Kimina Lean server that sends concurrent checks as batches.

Checks that arrive together (a request's items run concurrently on the event loop) wait up to ``batch_wait_ms``
and leave as one ``POST /api/check`` (``/verify`` for a 1.x server) of at most ``max_batch`` snippets;
``max_concurrency`` such requests are in flight at once. Trouble is named: a server that stays down (connection
errors, 429/5xx after retries, a refused key, a wrong URL) raises ``VerifierUnavailable``; an answer the protocol does
not allow raises ``LeanServerError``. Neither can become a score.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass

import httpx

from verifiers.context import ResourceKey
from verifiers.kinds.http_calls import Failures, RetryPolicy, send_with_retries
from verifiers.kinds.lean.protocol import PATHS, Api, LeanServerError, SnippetResult, parse_results, request_body
from verifiers.types import VerifierUnavailable

log = logging.getLogger(__name__)

# A Kimina server answers a wrong path's method with 405, and a 409 is no conflict a retry resolves.
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
REFUSED_STATUS = frozenset({401, 403, 404, 405})


@dataclass
class _Pending:
    id: str
    code: str
    future: asyncio.Future[SnippetResult]


class LeanClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: int = 60,
        http_timeout_s: float = 900.0,
        max_batch: int = 32,
        batch_wait_ms: float = 20.0,
        max_concurrency: int = 4,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        backoff_max_s: float = 10.0,
        api: Api = "check",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api: Api = api
        self.timeout_s = timeout_s
        self.max_batch = max_batch
        self.batch_wait_s = batch_wait_ms / 1000.0
        self.max_retries = max_retries
        self.retry = RetryPolicy(max_retries, backoff_s, backoff_max_s, RETRY_STATUS, REFUSED_STATUS)
        self._failures = Failures.worded(f"Lean server {self.base_url}", VerifierUnavailable, LeanServerError)
        self.ready = True
        self.requests_sent = 0
        # Kimina server 1.x/2.0 reads "Authorization: Bearer", later versions "X-Auth-Token": both carry the key.
        headers = {"Authorization": f"Bearer {api_key}", "X-Auth-Token": api_key} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers,
            timeout=httpx.Timeout(max(http_timeout_s, timeout_s + 30.0), connect=10.0),
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
        )
        self._slots = asyncio.Semaphore(max_concurrency)
        self._ids = itertools.count()
        self._pending: dict[int, list[_Pending]] = {}  # by Lean time limit: one request carries one
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:  # never shows the key
        return f"LeanClient(base_url={self.base_url!r}, api={self.api!r}, timeout_s={self.timeout_s})"

    async def aclose(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for batch in self._pending.values():
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(VerifierUnavailable("the Lean client shut down"))
        self._pending.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._client.aclose()

    async def check(self, code: str, timeout_s: int | None = None) -> SnippetResult:
        """Check one snippet, batched with the others waiting now."""
        limit = int(timeout_s or self.timeout_s)
        loop = asyncio.get_running_loop()
        pending = _Pending(f"s{next(self._ids)}", code, loop.create_future())
        queue = self._pending.setdefault(limit, [])
        queue.append(pending)
        if len(queue) >= self.max_batch:
            self._flush(limit)
        elif limit not in self._timers:
            self._timers[limit] = loop.call_later(self.batch_wait_s, self._flush, limit)
        return await pending.future

    def _flush(self, limit: int) -> None:
        timer = self._timers.pop(limit, None)
        if timer is not None:
            timer.cancel()
        batch = [p for p in self._pending.pop(limit, []) if not p.future.done()]  # callers that gave up cost nothing
        if batch:
            task = asyncio.get_running_loop().create_task(self._send(batch, limit))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[_Pending], limit: int) -> None:
        try:
            async with self._slots:
                results = await self._post(batch, limit)
        except BaseException as exc:  # a cancelled send (shutdown) must not leave its callers waiting
            failure = exc if isinstance(exc, Exception) else VerifierUnavailable("the Lean client shut down")
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(failure)
            if not isinstance(exc, Exception):
                raise
            return
        for p in batch:
            if not p.future.done():
                p.future.set_result(results[p.id])

    async def _post(self, batch: list[_Pending], limit: int) -> dict[str, SnippetResult]:
        body = request_body([(p.id, p.code) for p in batch], limit, self.api)

        async def send() -> httpx.Response:
            self.requests_sent += 1
            return await self._client.post(PATHS[self.api], json=body)

        response = await send_with_retries(send, self.retry, self._failures, log=log, what="lean server")
        try:
            payload = response.json()
        except ValueError:
            raise LeanServerError(f"malformed Lean server answer: not JSON: {response.text[:200]!r}") from None
        return parse_results(payload, [p.id for p in batch])


LEAN: ResourceKey[LeanClient] = ResourceKey("lean")
