"""What the kinds that call a server over HTTP share (the judges' backends, remote reward models, the Lean client):
which answers are worth another try, which say the server refuses us, how long a Retry-After asks to wait, and the
one retry loop that applies them. Not a kind: it exports no verifiers, and imports nothing of the kinds, so any of
them may use it without importing another."""
from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

# Worth another try: rate limits, overload, gateway trouble, request timeouts.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# The backend is misconfigured (bad key, wrong model or path): no answer will come, whatever we send.
REFUSED_STATUS = frozenset({401, 403, 404})


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class RetryPolicy:
    """How one backend retries: attempts, jittered exponential backoff, which statuses mean what."""

    max_retries: int
    backoff_s: float
    backoff_max_s: float
    retryable: frozenset[int] = RETRYABLE_STATUS
    refused: frozenset[int] = REFUSED_STATUS

    def backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_max_s, self.backoff_s * (2.0**attempt))
        return ceiling * (0.5 + random.random() / 2)  # equal jitter: spread retries, keep a floor


@dataclass(frozen=True)
class Failures:
    """What a caller raises for each way a call ends without a usable answer: the server refuses us (misconfigured),
    it rejects this request (no retry helps), or it stays unreachable after every attempt."""

    refused: Callable[[httpx.Response], Exception]
    rejected: Callable[[httpx.Response], Exception]
    unavailable: Callable[[str, int], Exception]  # (the last trouble, attempts made)

    @classmethod
    def worded(
        cls,
        who: str,
        unavailable: Callable[[str], Exception],
        rejected: Callable[[str], Exception],
        *,
        detail: Callable[[httpx.Response], str] = lambda r: r.text[:200],
        request: str = "the request",
    ) -> Failures:
        """The three failures of a call to ``who``, worded alike for every server so a reason reads the same
        whichever kind wrote it: a refusal and an exhausted retry become ``unavailable``, a rejected ``request``
        becomes ``rejected``; ``detail`` words the server's answer."""
        return cls(
            refused=lambda r: unavailable(f"{who} refused the call: HTTP {r.status_code}: {detail(r)}"),
            rejected=lambda r: rejected(f"{who} rejected {request}: HTTP {r.status_code}: {detail(r)}"),
            unavailable=lambda last, attempts: unavailable(f"{who} unavailable after {attempts} attempts: {last}"),
        )


async def send_with_retries(
    send: Callable[[], Awaitable[httpx.Response]],
    policy: RetryPolicy,
    failures: Failures,
    *,
    log: logging.Logger,
    what: str,
    timeout_s: float | None = None,
    hinted_wait: Callable[[float], float] | None = None,
    on_retry: Callable[[], None] | None = None,
    describe: Callable[[httpx.Response], str] | None = None,
) -> httpx.Response:
    """Send until a 200 arrives (returned), the server refuses or rejects the call, or the attempts run out.

    ``hinted_wait`` turns a retryable answer's Retry-After into the wait before the next attempt (None: the hint is
    ignored and the backoff applies); ``on_retry`` is told of each retry (for counters); ``describe`` words a
    retryable answer for the log and the final error (default: its status).
    """
    last = "no attempt made"
    for attempt in range(policy.max_retries + 1):
        wait = policy.backoff(attempt)
        try:
            response = await send()
        except httpx.TimeoutException:
            last = f"no reply within {timeout_s:g}s" if timeout_s is not None else "no reply in time"
        except httpx.TransportError as exc:
            last = f"connection failed ({type(exc).__name__})"
        else:
            code = response.status_code
            if code == 200:
                return response
            if code in policy.refused:
                raise failures.refused(response)
            if code not in policy.retryable:
                raise failures.rejected(response)
            last = describe(response) if describe is not None else f"HTTP {code}"
            hinted = retry_after(response)
            if hinted is not None and hinted_wait is not None:
                wait = hinted_wait(hinted)
        if attempt < policy.max_retries:
            if on_retry is not None:
                on_retry()
            log.warning("%s: %s; retry %d/%d in %.2fs", what, last, attempt + 1, policy.max_retries, wait)
            await asyncio.sleep(wait)
    raise failures.unavailable(last, policy.max_retries + 1)
