"""What stands between the socket and the routes, each answering before a request's body is read into memory.

- ``TokenGate``: the one token check, for every protected path (``/v1/…``, ``/openrlhf/…``, ``/run_code``); an
  unauthenticated client cannot make the server buffer and parse megabytes (a route-level check would only run after
  FastAPI read the whole body). Constant-time comparison; the token is never logged.
- ``BodySizeLimit``: 413 for a body over the configured size.
- ``http_protocol``: the HTTP/1.1 protocol uvicorn serves with, with a bound on a request's head.

httptools (uvicorn's fast parser) keeps the request line and headers of a request in memory until they are
complete, with no limit: one connection sending an endless header grew the server by its size (hundreds of MiB).
uvicorn bounds this only for its h11 parser. Here a head still incomplete after ``MAX_HEAD_BYTES`` is answered 431
and the connection closed. The bound is counted per chunk fed to the parser, after feeding it, so a chunk that
completes the head and carries the body with it never counts (asyncio hands over up to 256 KiB per chunk).
"""
from __future__ import annotations

import hmac
import json
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service.logs import request_id_var

# OpenRLHF and SandboxFusion clients cannot send headers: their paths also take the token as ``?token=``; so do the
# environments' (a WebSocket client may not send one either).
_QUERY_TOKEN_PATHS = ("/openrlhf/", "/run_code", "/envs")
_PROTECTED = ("/v1/", "/openrlhf/", "/run_code", "/envs")


def token_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.strip().encode(), token.encode())


class TokenGate:
    """401 for a protected path (``/v1/…``, ``/openrlhf/…``, ``/run_code``, ``/envs…``) without the token, answered
    before the body is read; a WebSocket of ``/envs`` is refused at its handshake (403). OpenRLHF and SandboxFusion
    clients cannot send headers, so their paths also take ``?token=``, as do the environments'."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] in ("http", "websocket") else ""
        protected = path.startswith(_PROTECTED)
        if self.token is None or not protected or self._authorised(scope, path):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await receive()  # the handshake's connect; closing before accepting answers it with a 403
            await send({"type": "websocket.close", "code": 1008})
            return
        detail = ("missing or invalid token (Authorization: Bearer, or ?token= in the URL)"
                  if path.startswith(_QUERY_TOKEN_PATHS) else "missing or invalid bearer token")
        data = json.dumps({"detail": detail, "request_id": request_id_var.get()}).encode()
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
        if path.startswith(_QUERY_TOKEN_PATHS):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            return any(token_matches(t, self.token) for t in query.get("token", []))
        return False


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(send)
            return
        seen = 0
        responded = False

        async def limited_receive() -> Message:
            # Over the limit: answer 413 ourselves and tell the app the client went away.
            nonlocal seen, responded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes and not responded:
                    responded = True
                    await self._reject(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not responded:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)

    async def _reject(self, send: Send) -> None:
        body: dict[str, Any] = {"detail": f"request body exceeds the limit of {self.max_bytes} bytes",
                                "request_id": request_id_var.get()}
        data = json.dumps(body).encode()
        await send({
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
        })
        await send({"type": "http.response.body", "body": data})


MAX_HEAD_BYTES = 1 << 20  # request line + headers; h11's default is 16 KiB, real clients send a few KiB


def http_protocol() -> Any:
    """The protocol class for ``uvicorn.run(http=...)``: the bounded httptools one, or "auto" (h11, bounded by
    uvicorn itself) where httptools is not installed."""
    try:
        from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
    except ImportError:
        return "auto"

    class BoundedHeadHttpTools(HttpToolsProtocol):
        """httptools with the head of each request bounded (see the module's docstring)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_bytes = 0
            self._in_head = True

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head = True

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._head_bytes = 0
            super().on_headers_complete()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._in_head and not self.transport.is_closing():
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEAD_BYTES:
                    self._refuse_head()

        def _refuse_head(self) -> None:
            msg = f"request line and headers over {MAX_HEAD_BYTES} bytes"
            self.logger.warning("refused a request: %s", msg)
            self.transport.write(b"".join([
                STATUS_LINE[431], b"content-type: text/plain; charset=utf-8\r\n",
                b"content-length: " + str(len(msg)).encode("ascii") + b"\r\n", b"connection: close\r\n\r\n",
                msg.encode("ascii")]))
            self.transport.close()

    return BoundedHeadHttpTools
