"""Optional bearer-token auth for the /v1 API, /openrlhf and /run_code (constant-time comparison; never logged).

``TokenGate`` checks the token in the ASGI layer, before the body is read: an unauthenticated client cannot make the
server buffer and parse megabytes (route-level checks would only run after FastAPI read the whole body)."""
from __future__ import annotations

import hmac
import json
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from reward_service.deps import SettingsDep
from reward_service.errors import ApiError
from reward_service.logs import request_id_var


async def require_token(request: Request, settings: SettingsDep) -> None:
    token = settings.auth.token
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode()):
        raise ApiError(401, "missing or invalid bearer token", headers={"WWW-Authenticate": "Bearer"})


def token_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.strip().encode(), token.encode())


class TokenGate:
    """401 for a protected path (``/v1/…``, ``/openrlhf/…``, ``/run_code``) without the token, answered before the
    body is read. OpenRLHF and SandboxFusion clients cannot send headers, so their paths also take ``?token=``."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        protected = path.startswith(("/v1/", "/openrlhf/", "/run_code"))
        if self.token is None or not protected or self._authorised(scope, path):
            await self.app(scope, receive, send)
            return
        data = json.dumps({"detail": "missing or invalid bearer token", "request_id": request_id_var.get()}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (b"www-authenticate", b"Bearer"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})

    def _authorised(self, scope: Scope, path: str) -> bool:
        assert self.token is not None
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer" and token_matches(given, self.token):
            return True
        if path.startswith(("/openrlhf/", "/run_code")):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            return any(token_matches(t, self.token) for t in query.get("token", []))
        return False
