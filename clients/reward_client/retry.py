"""When to retry and how long to wait: jittered exponential backoff that never waits less than the server asked.

Only answers that say "try again later" are retried (429, 502, 503, 504) plus transport failures (refused or reset
connections, timeouts); every other 4xx is the caller's mistake and is raised at once.

Retrying is bounded by time, not by a count: a training run should ride out a restart or redeploy of the service
(tens of seconds), so the default budget is minutes (``REWARD_CLIENT_RETRY_BUDGET_S``, 300 s); ``attempts`` is an
optional extra cap for callers that want to fail fast.
"""
from __future__ import annotations

import email.utils
import os
import random
import time
from dataclasses import dataclass, field

import httpx

RETRY_STATUSES = frozenset({429, 502, 503, 504})
BUDGET_ENV = "REWARD_CLIENT_RETRY_BUDGET_S"
DEFAULT_BUDGET_S = 300.0


def _default_budget() -> float:
    return float(os.environ.get(BUDGET_ENV) or DEFAULT_BUDGET_S)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int | None = None  # cap on tries, the first included; None: only budget_s limits
    budget_s: float = field(default_factory=_default_budget)  # seconds of retrying before giving up
    base_delay_s: float = 0.25
    max_delay_s: float = 10.0  # a restarted service is noticed within this long
    max_retry_after_s: float = 120.0  # a larger Retry-After is clipped to this
    retry_timeouts: bool = True  # every endpoint is idempotent, so a timed-out call may be sent again

    def delay(self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 1).

        Full jitter over the exponential cap spreads clients that failed together; when the server sent
        Retry-After, wait at least that long (plus a little jitter, so they do not all come back at once).
        """
        r = rng or random
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        backoff = r.uniform(0, cap)
        if retry_after is None:
            return backoff
        floor = min(retry_after, self.max_retry_after_s)
        return floor + r.uniform(0, min(cap, max(floor, self.base_delay_s)) * 0.25)

    def exhausted(self, attempt: int, elapsed_s: float, wait_s: float) -> bool:
        """True when no further try fits: the attempt cap is reached or waiting would overrun the time budget."""
        if self.attempts is not None and attempt >= self.attempts:
            return True
        return elapsed_s + wait_s > self.budget_s

    def retryable_exception(self, exc: BaseException) -> bool:
        if isinstance(exc, httpx.TimeoutException):
            return self.retry_timeouts
        return isinstance(exc, httpx.TransportError)


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After is either delta-seconds or an HTTP date (RFC 9110 §10.2.3); anything else is ignored."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())
