"""The errors of the environments' wire, each with its typed ``code`` and HTTP status: a trainer masks an episode on
``session_lost`` or ``infra_error`` (never a reward of 0), waits ``retry_after_s`` on ``capacity``, and fixes its
request on ``invalid_request`` (which names the field)."""
from __future__ import annotations

from typing import Any


class EnvError(Exception):
    code = "env_error"
    http_status = 500
    ws_code = "EXECUTION_ERROR"  # OpenEnv's WebSocket error code for the same failure

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.message, **self.details}


class InvalidRequest(EnvError):
    """A malformed request: ``field`` names where (``action.code``, ``session_id``, ``reward.verifier``)."""

    code = "invalid_request"
    http_status = 422
    ws_code = "VALIDATION_ERROR"

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message, field=field)


class UnknownEnvironment(EnvError):
    code = "unknown_environment"
    http_status = 404
    ws_code = "FACTORY_ERROR"


class SessionLost(EnvError):
    """The session is gone: closed, reaped (idle or past its lifetime), its sandbox died, or the instance that held
    it restarted. The episode cannot go on; a trainer masks it."""

    code = "session_lost"
    http_status = 410
    ws_code = "SESSION_ERROR"


class Capacity(EnvError):
    """No room for another session now (this instance's or this client's maximum): retry after ``retry_after_s``."""

    code = "capacity"
    http_status = 429
    ws_code = "CAPACITY_REACHED"

    def __init__(self, message: str, retry_after_s: int, **details: Any) -> None:
        super().__init__(message, retry_after_s=retry_after_s, **details)
        self.retry_after_s = retry_after_s


class InfraError(EnvError):
    """The service failed (the sandbox could not start, a backend is down): not the policy's doing."""

    code = "infra_error"
    http_status = 503
    ws_code = "EXECUTION_ERROR"
