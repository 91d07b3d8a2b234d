"""The parts of talking to the service that do not depend on sync or async I/O: configuration, batching, and
turning one HTTP outcome into "done", "wait and retry" or an exception. Both clients share them."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

import httpx

from reward_client.errors import RequestRejected, ServerError, ServiceUnavailable
from reward_client.retry import BUDGET_ENV, RETRY_STATUSES, RetryPolicy, parse_retry_after

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "REWARD_CLIENT_URL"
TOKEN_ENV = "REWARD_CLIENT_TOKEN"

T = TypeVar("T")
Outcome = Union[httpx.Response, BaseException]


@dataclass
class ClientConfig:
    base_url: str = ""
    token: Optional[str] = None
    timeout: Union[float, httpx.Timeout] = 180.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    chunk_size: int = 256  # items per request; the server's own cap (max_batch_items) is 4096 by default
    max_concurrency: int = 4  # chunks in flight at once (async client)
    headers: Dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.base_url = (self.base_url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        if self.token is None:
            self.token = os.environ.get(TOKEN_ENV) or None
        if self.chunk_size < 1 or self.max_concurrency < 1:
            raise ValueError("chunk_size and max_concurrency must be at least 1")

    def http_kwargs(self) -> Dict[str, Any]:
        headers = {"user-agent": "reward-client/0.1", **self.headers}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        timeout = self.timeout if isinstance(self.timeout, httpx.Timeout) else httpx.Timeout(self.timeout, connect=10.0)
        return {"base_url": self.base_url, "headers": headers, "timeout": timeout}


def chunks(seq: Sequence[T], size: int) -> Iterator[Tuple[int, Sequence[T]]]:
    """(offset, slice) pairs covering ``seq`` in order."""
    for start in range(0, len(seq), size):
        yield start, seq[start:start + size]


def _message(response: httpx.Response) -> Tuple[str, Optional[List[Any]]]:
    try:
        body = response.json()
    except ValueError:
        return (response.text[:500] or response.reason_phrase), None
    if isinstance(body, dict):
        detail = body.get("detail", body)
        return (detail if isinstance(detail, str) else str(detail)[:500]), body.get("loc")
    return str(body)[:500], None


def judge(outcome: Outcome, attempt: int, policy: RetryPolicy, path: str,
          elapsed_s: float = 0.0) -> Union[Any, float]:
    """The decoded JSON body when the call succeeded, or the seconds to wait before the next try.

    Raises ``RequestRejected`` for a 4xx that retrying cannot fix, ``ServerError`` for other 5xx, and
    ``ServiceUnavailable`` when the retry budget (tries or seconds since the first try) cannot fit another try.
    """
    if isinstance(outcome, BaseException):
        if not policy.retryable_exception(outcome):
            raise outcome
        wait = policy.delay(attempt)
        if policy.exhausted(attempt, elapsed_s, wait):
            raise _gave_up(f"{path}: {type(outcome).__name__}: {outcome}", attempt, elapsed_s, policy, None) \
                from outcome
        return wait
    status = outcome.status_code
    if status < 300:
        return outcome.json()
    message, loc = _message(outcome)
    if status in RETRY_STATUSES:
        wait = policy.delay(attempt, parse_retry_after(outcome.headers.get("retry-after")))
        if policy.exhausted(attempt, elapsed_s, wait):
            raise _gave_up(f"{path} answered {status}: {message}", attempt, elapsed_s, policy, status)
        return wait
    if 400 <= status < 500:
        raise RequestRejected(status, message, loc, path)
    raise ServerError(status, message, path)


def _gave_up(last: str, attempt: int, elapsed_s: float, policy: RetryPolicy,
             status: Optional[int]) -> ServiceUnavailable:
    """Name the last failure and the budget that ran out, and how to widen it."""
    cap = f"{policy.attempts} tries, " if policy.attempts is not None else ""
    hint = (f"retry budget {cap}{policy.budget_s:g} s spent after {elapsed_s:.1f} s; widen it with "
            f"RetryPolicy(budget_s=...) or {BUDGET_ENV}")
    return ServiceUnavailable(f"{last} [{hint}]", attempt, status)


def shift_loc(exc: RequestRejected, offset: int) -> RequestRejected:
    """Re-express ``items[i]`` in a chunk's error as the caller's own index."""
    loc = exc.loc
    if offset and loc and len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int):
        loc = ["items", loc[1] + offset, *loc[2:]]
        message = exc.message.replace(f"items[{exc.loc[1]}]", f"items[{loc[1]}]", 1)  # type: ignore[index]
        return RequestRejected(exc.status_code, message, loc, exc.path)
    return exc


def splittable(exc: RequestRejected, n_items: int) -> bool:
    """A 413 about the batch (item count or body bytes) goes away by halving it; one naming an item does not."""
    names_item = bool(exc.loc and len(exc.loc) >= 2 and isinstance(exc.loc[1], int))
    return exc.status_code == 413 and n_items > 1 and not names_item
