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


class EpisodeFailed(RewardServiceError):
    """An environment session failed for a reason of infrastructure, not of the policy: the episode cannot be
    scored and a trainer should mask it (a reward of None), never give it 0. ``code`` is the server's typed code."""

    code = "infra_error"

    def __init__(self, message: str, session_id: str = "", url: str = "") -> None:
        super().__init__(f"{self.code}: {message}" + (f" (session {session_id} at {url})" if session_id else ""))
        self.message = message
        self.session_id = session_id
        self.url = url


class SessionLost(EpisodeFailed):
    """The session is gone: its instance died or restarted, it was reaped, or the call's outcome is unknown (no
    answer in time), so its state cannot be trusted. Never retried on another instance: the state lived there."""

    code = "session_lost"


class InfraError(EpisodeFailed):
    """The server could not carry out a session's call (its sandbox died, a backend failed): ``infra_error``."""

    code = "infra_error"
