"""The parts of talking to the service that do not depend on sync or async I/O: configuration, batching, and
turning one HTTP outcome into "done", "wait and retry" or an exception. Both clients share them."""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

import httpx

from reward_client.errors import RequestRejected, ServerError, ServiceUnavailable, ServiceUnreachable
from reward_client.retry import BUDGET_ENV, FIRST_CONTACT_ENV, RETRY_STATUSES, RetryPolicy, parse_retry_after

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "REWARD_CLIENT_URL"
TOKEN_ENV = "REWARD_CLIENT_TOKEN"

T = TypeVar("T")
Outcome = Union[httpx.Response, BaseException]
Timeout = Union[float, httpx.Timeout]
Urls = Union[str, Sequence[str], None]  # one base URL, several (a list, or one string with commas), or none
log = logging.getLogger("reward_client")

# Failures that mean nothing answered at the address: before any answer from a URL, a wrong URL or a service not
# started; after one, an outage (a restart) to ride out.
CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)

_reached: set[str] = set()  # base URLs that have answered a client of this process
_reached_lock = threading.Lock()


@dataclass
class ClientConfig:
    base_url: str = ""
    token: str | None = None
    timeout: float | httpx.Timeout = 180.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    chunk_size: int = 256  # items per request; the server's own cap (max_batch_items) is 4096 by default
    max_concurrency: int = 4  # chunks in flight at once (async client)
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def given(cls, base_url: Urls, token: str | None, timeout: Timeout, retry: RetryPolicy | None, chunk_size: int,
              max_concurrency: int, headers: dict[str, str] | None) -> ClientConfig:
        """The settings a client's constructor was given: several URLs joined, no retry policy the default one."""
        return cls(join_urls(base_url), token, timeout, retry or RetryPolicy(), chunk_size, max_concurrency,
                   headers or {})

    def __post_init__(self) -> None:
        self.base_url = ",".join(split_urls(self.base_url) or split_urls(os.environ.get(URL_ENV)) or [DEFAULT_URL])
        if self.token is None:
            self.token = os.environ.get(TOKEN_ENV) or None
        if self.chunk_size < 1 or self.max_concurrency < 1:
            raise ValueError("chunk_size and max_concurrency must be at least 1")

    @property
    def urls(self) -> list[str]:
        """The instances' base URLs (one, or several: ``base_url`` holds them comma-separated)."""
        return split_urls(self.base_url)

    def http_kwargs(self) -> dict[str, Any]:
        headers = {"user-agent": "reward-client/0.1", **self.headers}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        timeout = self.timeout if isinstance(self.timeout, httpx.Timeout) else httpx.Timeout(self.timeout, connect=10.0)
        return {"base_url": self.base_url, "headers": headers, "timeout": timeout}


def split_urls(urls: Urls) -> list[str]:
    """Base URLs from a list, or a string of one or several separated by commas (as in ``REWARD_CLIENT_URL`` and
    the adapters' settings); blanks dropped, trailing slashes removed, a repeated URL kept once."""
    if not urls:
        return []
    parts = urls.split(",") if isinstance(urls, str) else [p for u in urls for p in str(u).split(",")]
    out: list[str] = []
    for part in parts:
        url = part.strip().rstrip("/")
        if url and url not in out:
            out.append(url)
    return out


def join_urls(urls: Urls) -> str:
    """The one-string form ``ClientConfig.base_url`` holds: the URLs of ``split_urls``, comma-separated."""
    return ",".join(split_urls(urls))


def group_of(item: Any) -> Any:
    """The GRPO group a wire item belongs to (None: it belongs to none and may travel with anything)."""
    return item.get("group") if isinstance(item, Mapping) else None


def runs(seq: Sequence[Any]) -> list[tuple[int, int]]:
    """(start, end) of each maximal run of consecutive items sharing one group; an ungrouped item is a run alone."""
    out: list[tuple[int, int]] = []
    start = 0
    for k in range(1, len(seq) + 1):
        if k == len(seq) or group_of(seq[k]) is None or group_of(seq[k]) != group_of(seq[k - 1]):
            out.append((start, k))
            start = k
    return out


def chunks(seq: Sequence[T], size: int) -> Iterator[tuple[int, Sequence[T]]]:
    """(offset, slice) pairs covering ``seq`` in order, at most ``size`` items each, never cutting a run of one group.

    The server scores a group (items sharing ``group``, e.g. consensus over a GRPO group) within one request, so a
    group cut in two would be scored as two smaller groups. A run longer than ``size`` travels alone, whole; the
    server's own cap (``max_batch_items``) is the only limit it must fit (see ``split_point``). Groups are runs: items
    of one group must be adjacent, as trainers send them.
    """
    start = end = 0
    for run_start, run_end in runs(seq):
        if run_end - start > size and end > start:
            yield start, seq[start:end]
            start = run_start
        end = run_end
    if end > start:
        yield start, seq[start:end]


def split_point(items: Sequence[Any]) -> int | None:
    """Where to halve a chunk the server found too large: the run boundary nearest its middle, so no group is cut;
    None when the chunk is one run (one group, or one item) and cannot be split."""
    bounds = [start for start, _ in runs(items)][1:]
    return min(bounds, key=lambda b: abs(2 * b - len(items))) if bounds else None


def unsplittable(exc: RequestRejected, items: Sequence[Any], offset: int) -> RequestRejected:
    """The server's 413 for a chunk that is one whole group: name the group, since no client-side split can help."""
    group = group_of(items[0]) if items else None
    if exc.status_code != 413 or _names_item(exc) or len(items) < 2 or group is None:
        return shift_loc(exc, offset)
    message = (f"group {group!r} (items[{offset}:{offset + len(items)}], {len(items)} items) is too large for one "
               f"request and a group cannot be split across requests; raise the server's max_batch_items or send "
               f"smaller groups (server said: {exc.message})")
    return RequestRejected(exc.status_code, message, exc.loc, exc.path)


def _message(response: httpx.Response) -> tuple[str, list[Any] | None]:
    try:
        body = response.json()
    except ValueError:
        return (response.text[:500] or response.reason_phrase), None
    if isinstance(body, dict):
        detail = body.get("detail", body)
        return (detail if isinstance(detail, str) else str(detail)[:500]), body.get("loc") or _schema_loc(body)
    return str(body)[:500], None


def _schema_loc(body: dict[str, Any]) -> list[Any] | None:
    """Where the request schema refused the body (FastAPI's ``errors``, located from "body"), when every error is
    about one item: ``["items", 3, ...]``, so that item can be told apart from the rest of the batch."""
    errors = body.get("errors")
    if not isinstance(errors, list) or not errors:
        return None
    locs: list[list[Any]] = []
    for error in errors:
        loc = error.get("loc") if isinstance(error, dict) else None
        if not (isinstance(loc, list) and loc[:2] == ["body", "items"] and len(loc) > 2 and isinstance(loc[2], int)):
            return None
        locs.append(loc)
    return locs[0][1:] if len({loc[2] for loc in locs}) == 1 else None


class Contact:
    """How a client's contact with its URL stands, for the retry loop: whether the URL ever answered this process
    (which decides how long a connection failure is retried), and the outage in progress, told in the log: a warning
    at its first failure (for 429, only once it has lasted ``notice_every_s``), a line of progress every
    ``notice_every_s``, and a line when the URL answers again."""

    def __init__(self, url: str, policy: RetryPolicy) -> None:
        self.url = url
        self.policy = policy
        self._lock = threading.Lock()
        self._since: float | None = None  # first failure of the outage in progress
        self._told: float | None = None  # when the log last said so

    @property
    def reached(self) -> bool:
        return self.url in _reached

    def answered(self, status: int) -> None:
        """An HTTP answer: the URL is right. Anything but a retried status ends an outage."""
        if self.url not in _reached:
            with _reached_lock:
                _reached.add(self.url)
        if status in RETRY_STATUSES:
            return
        with self._lock:
            since, told, self._since, self._told = self._since, self._told, None, None
        if since is not None and told is not None:
            log.info("%s answers again after %.0f s", self.url, time.monotonic() - since)

    def failed(self, reason: str, urgent: bool, window_s: float) -> None:
        now = time.monotonic()
        with self._lock:
            if self._since is None:
                self._since = now
            lasted = now - self._since
            if self._told is None:
                if not urgent and lasted < self.policy.notice_every_s:
                    return
                first = True
            elif now - self._told >= self.policy.notice_every_s:
                first = False
            else:
                return
            self._told = now
        if first and self.reached:
            log.warning("lost contact with %s (%s); retrying for up to %g s", self.url, reason, window_s)
        elif first:
            log.warning("no answer from %s yet (%s); retrying for up to %g s", self.url, reason, window_s)
        else:
            log.warning("still no answer from %s after %.0f s (%s); retrying for up to %g s", self.url, lasted,
                        reason, window_s)


def judge(outcome: Outcome, attempt: int, policy: RetryPolicy, path: str,
          elapsed_s: float = 0.0, contact: Contact | None = None) -> Any | float:
    """The decoded JSON body when the call succeeded, or the seconds to wait before the next try.

    Raises ``RequestRejected`` for a 4xx that retrying cannot fix, ``ServerError`` for other 5xx, and
    ``ServiceUnavailable`` when the retry budget (tries or seconds since the first try) cannot fit another try;
    ``ServiceUnreachable`` when ``contact``'s URL never answered and the first-contact window is spent.
    """
    if isinstance(outcome, BaseException):
        if isinstance(outcome, httpx.UnsupportedProtocol):
            url = contact.url if contact is not None else "the URL"
            raise ServiceUnreachable(f"cannot reach {url}: {str(outcome).rstrip('.')}; a URL starts with http:// "
                                     "or https://", attempt) from outcome
        if not policy.retryable_exception(outcome):
            raise outcome
        wait = policy.delay(attempt)
        last = f"{path}: {type(outcome).__name__}: {outcome}"
        if contact is not None and not contact.reached and isinstance(outcome, CONNECT_ERRORS):
            window = policy.first_contact_window()
            if policy.exhausted(attempt, elapsed_s, wait, window):
                raise _unreachable(contact.url, last, attempt, elapsed_s, policy) from outcome
        else:
            window = policy.budget_s
            if policy.exhausted(attempt, elapsed_s, wait):
                raise _gave_up(last, attempt, elapsed_s, policy, None) from outcome
        if contact is not None:
            contact.failed(last, True, window)
        return wait
    status = outcome.status_code
    if contact is not None:
        contact.answered(status)
    if status < 300:
        return outcome.json()
    message, loc = _message(outcome)
    if status in RETRY_STATUSES:
        wait = policy.delay(attempt, parse_retry_after(outcome.headers.get("retry-after")))
        if policy.exhausted(attempt, elapsed_s, wait):
            raise _gave_up(f"{path} answered {status}: {message}", attempt, elapsed_s, policy, status)
        if contact is not None:
            contact.failed(f"{path} answered {status}: {message}", status != 429, policy.budget_s)
        return wait
    if 400 <= status < 500:
        raise RequestRejected(status, message, loc, path)
    raise ServerError(status, message, path)


def _unreachable(url: str, last: str, attempt: int, elapsed_s: float, policy: RetryPolicy) -> ServiceUnreachable:
    """Nothing ever answered at the URL: say which URL and what to check, and which limit ended the tries."""
    if policy.attempts is not None and attempt >= policy.attempts:
        limit = f"{policy.attempts} tries spent"
    elif policy.first_contact_window() < policy.budget_s:
        limit = (f"no answer for {elapsed_s:.1f} s; a client started before its service waits longer with "
                 f"RetryPolicy(first_contact_s=...) or {FIRST_CONTACT_ENV}")
    else:
        limit = (f"retry budget {policy.budget_s:g} s spent after {elapsed_s:.1f} s; widen it with "
                 f"RetryPolicy(budget_s=...) or {BUDGET_ENV}")
    return ServiceUnreachable(f"cannot reach {url}: is the service running? Check the URL ({URL_ENV}) and that "
                              f"`reward-service serve` is up there ({last}; {limit})", attempt)


def _gave_up(last: str, attempt: int, elapsed_s: float, policy: RetryPolicy,
             status: int | None) -> ServiceUnavailable:
    """Name the last failure and the budget that ran out, and how to widen it."""
    cap = f"{policy.attempts} tries, " if policy.attempts is not None else ""
    hint = (f"retry budget {cap}{policy.budget_s:g} s spent after {elapsed_s:.1f} s; widen it with "
            f"RetryPolicy(budget_s=...) or {BUDGET_ENV}")
    return ServiceUnavailable(f"{last} [{hint}]", attempt, status)


def shift_loc(exc: RequestRejected, offset: int) -> RequestRejected:
    """Re-express ``items[i]`` in a chunk's error as the caller's own index."""
    loc = exc.loc
    if offset and loc and len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int):
        shifted = ["items", loc[1] + offset, *loc[2:]]
        message = exc.message.replace(f"items[{loc[1]}]", f"items[{shifted[1]}]", 1)
        return RequestRejected(exc.status_code, message, shifted, exc.path)
    return exc


def splittable(exc: RequestRejected, items: Sequence[Any]) -> bool:
    """A 413 about the batch (item count or body bytes) goes away by halving it at a group boundary; one naming an
    item, or one about a chunk that is a single group, does not."""
    return exc.status_code == 413 and not _names_item(exc) and split_point(items) is not None


def _names_item(exc: RequestRejected) -> bool:
    return bool(exc.loc and len(exc.loc) >= 2 and isinstance(exc.loc[1], int))
