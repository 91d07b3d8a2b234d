"""Optional bearer-token auth for the /v1 API (constant-time comparison; the token is never logged)."""
from __future__ import annotations

import hmac

from fastapi import Request

from reward_service.errors import ApiError


async def require_token(request: Request) -> None:
    token = request.app.state.services.settings.auth_token
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode()):
        raise ApiError(401, "missing or invalid bearer token", headers={"WWW-Authenticate": "Bearer"})
