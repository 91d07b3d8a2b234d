"""Exceptions the client raises. A rejected request (bad input) and an unreachable service are different failures:
the first will fail again if retried, the second may not."""
from __future__ import annotations

from typing import Any


class RewardServiceError(Exception):
    """Base class of everything the client raises."""


class RequestRejected(RewardServiceError):
    """The server refused the request with a 4xx other than 429: retrying cannot help, the call must change."""

    def __init__(self, status_code: int, message: str, loc: list[Any] | None = None, path: str = "") -> None:
        where = f" at {'.'.join(map(str, loc))}" if loc else ""
        super().__init__(f"{path} answered {status_code}: {message}{where}")
        self.status_code = status_code
        self.message = message
        self.loc = loc
        self.path = path


class ServiceUnavailable(RewardServiceError):
    """The service stayed overloaded, unreachable or broken (429/5xx/connection errors) through every retry."""

    def __init__(self, message: str, attempts: int, status_code: int | None = None) -> None:
        super().__init__(f"{message} (after {attempts} attempt{'s' if attempts != 1 else ''})")
        self.attempts = attempts
        self.status_code = status_code


class ServerError(RewardServiceError):
    """The server failed on its side (500) on a request it accepted; not retried, since it may fail the same way."""

    def __init__(self, status_code: int, message: str, path: str = "") -> None:
        super().__init__(f"{path} answered {status_code}: {message}")
        self.status_code = status_code
        self.message = message


class ServiceUnreachable(ServiceUnavailable):
    """Nothing ever answered at the URL: a wrong URL or a service that is not running, told within seconds rather
    than after the retry budget (``RetryPolicy.first_contact_s``). A ``ServiceUnavailable``, so handlers of an outage
    catch it too."""
