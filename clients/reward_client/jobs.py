"""``submit()``: score a batch as a job (``/v1/jobs``) and get one future per item, resolved as its verdict streams in,
so a trainer reads early rewards while the rest are still being scored (and while it generates).

The batch is cut into chunks of ``chunk_size``; each chunk is one job on one instance (the instances take chunks in
turn), its verdicts read from that instance's NDJSON stream. A stream that breaks (the instance restarts) is read
again from where it stopped (``?after=``): with the server's job store on, the job goes on there. A job the instance
reports ``lost`` (restarted without a store) is submitted again with only its items still undecided, so no item is
lost and none is answered twice. Accepting a job is retried as every call is (``RetryPolicy``: 429/503, connection
trouble); an item that cannot be answered within the retry budget gets the error as its future's exception.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Callable, Protocol

import httpx

from reward_client.errors import RewardServiceError
from reward_client.protocol import ClientConfig
from reward_client.results import VerifyResult


class JobsClient(Protocol):
    """What submitting jobs needs of one instance's client (``AsyncRewardClient`` is one); a protocol, so this
    module never imports the client that imports it."""

    config: ClientConfig

    async def request_json(self, method: str, path: str, json: Any = None) -> Any: ...

    def stream_lines(self, path: str,
                     params: dict[str, Any]) -> AbstractAsyncContextManager[tuple[int, Any]]: ...

Deliver = Callable[[int, VerifyResult], None]
Fail = Callable[[int, BaseException], None]
PRIORITIES = ("high", "normal", "low")


class JobLost(RewardServiceError):
    """The service no longer knows a job and it cannot be submitted again."""


class Submission:
    """What ``submit`` returns: ``futures[i]`` resolves to item ``i``'s ``VerifyResult`` as soon as it is decided
    (``concurrent.futures.Future`` from ``RewardClient``, ``asyncio.Future`` from ``AsyncRewardClient``); ``jobs``
    lists the (instance URL, job id) pairs, ``cancel()`` deletes them (their unfinished items resolve ``cancelled``).
    """

    def __init__(self, futures: list[Any], jobs: list[tuple[str, str]], cancel: Callable[[], Any]) -> None:
        self.futures = futures
        self.jobs = jobs
        self._cancel = cancel

    def __len__(self) -> int:
        return len(self.futures)

    def results(self, timeout: float | None = None) -> list[VerifyResult]:
        """Every verdict, in the items' order (blocking; for the sync client's futures)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        return [f.result(None if deadline is None else max(0.0, deadline - time.monotonic())) for f in self.futures]

    def cancel(self) -> Any:
        """Delete the jobs: queued items are dropped, running checks and programs stopped."""
        return self._cancel()


class _Retry(Exception):
    """A results stream answered with a status worth trying again."""


def check_priority(priority: str) -> None:
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, not {priority!r}")


async def run_jobs(instances: Sequence[JobsClient], items: list[dict[str, Any]], chunk_size: int,
                   priority: str, tags: list[str], deliver: Deliver, fail: Fail, jobs: list[tuple[str, str]],
                   accepted: asyncio.Event) -> None:
    """Submit the chunks and read their streams until every item is delivered (or failed)."""
    starts = list(range(0, len(items), max(1, chunk_size)))
    waits = [asyncio.Event() for _ in starts]

    async def one(k: int, start: int) -> None:
        chunk = items[start:start + chunk_size]
        try:
            await _one_job(instances[k % len(instances)], start, chunk, priority, tags, deliver, jobs, waits[k])
        except BaseException as exc:
            for i in range(start, start + len(chunk)):
                fail(i, exc)
            waits[k].set()
            if not isinstance(exc, Exception):
                raise

    tasks = [asyncio.ensure_future(one(k, start)) for k, start in enumerate(starts)]
    await asyncio.gather(*(w.wait() for w in waits))
    accepted.set()
    await asyncio.gather(*tasks)


async def _one_job(client: JobsClient, offset: int, chunk: list[dict[str, Any]], priority: str,
                   tags: list[str], deliver: Deliver, jobs: list[tuple[str, str]], accepted: asyncio.Event) -> None:
    pending = dict(enumerate(chunk))  # local index -> item, until its verdict is delivered
    url = client.config.base_url
    policy = client.config.retry
    while pending:
        order = list(pending)  # the job's item index -> local index
        body = {"items": [pending[i] for i in order], "priority": priority, "tags": tags}
        job = await client.request_json("POST", "/v1/jobs", body)
        job_id = str(job["id"])
        jobs.append((url, job_id))
        accepted.set()
        read, attempt, started = 0, 0, time.monotonic()
        while pending:
            try:
                async with client.stream_lines(f"/v1/jobs/{job_id}/results", {"after": read}) as (status, lines):
                    if status == 410:  # lost: submit what is left again
                        break
                    if status == 404:
                        raise JobLost(f"{url} no longer knows job {job_id} (expired?); "
                                      f"{len(pending)} of its items undecided")
                    if status >= 300:  # 503 while the instance starts or drains, 5xx: read again shortly
                        raise _Retry(f"status {status}")
                    async for line in lines:
                        if not line:
                            continue
                        data = json.loads(line)
                        read += 1
                        local = order[int(data.pop("index"))]
                        if pending.pop(local, None) is not None:
                            deliver(offset + local, VerifyResult.from_json(data))
                    attempt = 0
            except (httpx.TransportError, _Retry) as exc:
                attempt += 1
                wait = policy.delay(attempt)
                if policy.exhausted(attempt, time.monotonic() - started, wait):
                    raise JobLost(f"the results of job {job_id} at {url} could not be read: {exc}") from exc
                await asyncio.sleep(wait)
