"""The HTTP/1.1 protocol uvicorn serves with: httptools, with a bound on a request's head.

httptools (uvicorn's fast parser) keeps the request line and headers of a request in memory until they are
complete, with no limit: one connection sending an endless header grew the server by its size (hundreds of MiB).
uvicorn bounds this only for its h11 parser. Here a head still incomplete after ``MAX_HEAD_BYTES`` is answered 431
and the connection closed. The bound is counted per chunk fed to the parser, after feeding it, so a chunk that
completes the head and carries the body with it never counts (asyncio hands over up to 256 KiB per chunk).
"""
from __future__ import annotations

from typing import Any

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
