"""What every HTTP test double shares: a script of replies played before the double's own behaviour, the requests
it received, and a uvicorn server on a free loopback port in a thread."""
from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar

import uvicorn

from tests.support.server import free_port

ReplyT = TypeVar("ReplyT")


class ScriptedDouble(Generic[ReplyT]):
    def __init__(self) -> None:
        self.url = ""
        self._lock = threading.Lock()
        self._script: deque[ReplyT] = deque()
        self.requests: list[dict[str, Any]] = []

    def queue(self, *replies: ReplyT) -> None:
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def record(self, body: dict[str, Any]) -> ReplyT | None:
        """Note a request; the next scripted reply, if any."""
        with self._lock:
            self.requests.append(body)
            return self._script.popleft() if self._script else None


class _Served(Protocol):
    app: Any
    url: str


D = TypeVar("D", bound=_Served)


@contextlib.contextmanager
def serve_double(fake: D, path: str = "") -> Iterator[D]:
    """Run ``fake.app`` under uvicorn in a thread; ``fake.url`` is its base URL (plus ``path``)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(fake.app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"{type(fake).__name__} did not start")
        time.sleep(0.01)
    fake.url = f"http://127.0.0.1:{port}{path}"
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(timeout=10)
