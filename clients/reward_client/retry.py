"""When to retry and how long to wait: jittered exponential backoff that never waits less than the server asked.

Only answers that say "try again later" are retried (429, 502, 503, 504) plus transport failures (refused or reset
connections, timeouts); every other 4xx is the caller's mistake and is raised at once.

Retrying is bounded by time, not by a count: a training run should ride out a restart or redeploy of the service
(tens of seconds), so the default budget is minutes (``REWARD_CLIENT_RETRY_BUDGET_S``, 300 s); ``attempts`` is an
optional extra cap for callers that want to fail fast.

A service this process has never reached is another matter: a refused connection then most likely means a wrong URL
or a service that was never started, and waiting minutes to say so helps nobody. Connection failures before the
first answer from a URL are retried for ``first_contact_s`` only (``REWARD_CLIENT_FIRST_CONTACT_S``, 5 s); the
trainer adapters, which may start while their service restarts, use ``trainer_policy``: the whole budget.
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
FIRST_CONTACT_ENV = "REWARD_CLIENT_FIRST_CONTACT_S"
DEFAULT_FIRST_CONTACT_S = 5.0


def _default_budget() -> float:
    return float(os.environ.get(BUDGET_ENV) or DEFAULT_BUDGET_S)


def _default_first_contact() -> float:
    return float(os.environ.get(FIRST_CONTACT_ENV) or DEFAULT_FIRST_CONTACT_S)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int | None = None  # cap on tries, the first included; None: only budget_s limits
    budget_s: float = field(default_factory=_default_budget)  # seconds of retrying before giving up
    base_delay_s: float = 0.25
    max_delay_s: float = 10.0  # a restarted service is noticed within this long
    max_retry_after_s: float = 120.0  # a larger Retry-After is clipped to this
    retry_timeouts: bool = True  # every endpoint is idempotent, so a timed-out call may be sent again
    # seconds of connection failures before the first answer from the URL (None: the whole budget_s)
    first_contact_s: float | None = field(default_factory=_default_first_contact)
    notice_every_s: float = 10.0  # while retrying, a line of progress in the log this often

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

    def exhausted(self, attempt: int, elapsed_s: float, wait_s: float, budget_s: float | None = None) -> bool:
        """True when no further try fits: the attempt cap is reached or waiting would overrun the time budget
        (``budget_s``, else the policy's own)."""
        if self.attempts is not None and attempt >= self.attempts:
            return True
        return elapsed_s + wait_s > (self.budget_s if budget_s is None else budget_s)

    def first_contact_window(self) -> float:
        """Seconds a URL never reached yet is retried: ``first_contact_s``, never more than the budget."""
        if self.first_contact_s is None:
            return self.budget_s
        return min(self.first_contact_s, self.budget_s)

    def retryable_exception(self, exc: BaseException) -> bool:
        if isinstance(exc, httpx.TimeoutException):
            return self.retry_timeouts
        if isinstance(exc, httpx.UnsupportedProtocol):  # a URL without http:// stays wrong however long we wait
            return False
        return isinstance(exc, httpx.TransportError)


def trainer_policy(budget_s: float | None = None) -> RetryPolicy:
    """The trainer adapters' default: a trainer may start while its service is (re)starting, so a URL never reached
    is retried for the whole budget too (with a warning at once and progress in the log), unless
    ``REWARD_CLIENT_FIRST_CONTACT_S`` says otherwise."""
    first_contact = float(os.environ[FIRST_CONTACT_ENV]) if os.environ.get(FIRST_CONTACT_ENV) else None
    if budget_s is None:
        return RetryPolicy(first_contact_s=first_contact)
    return RetryPolicy(budget_s=float(budget_s), first_contact_s=first_contact)


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
