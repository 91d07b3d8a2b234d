"""A real server on a fixed port that can be stopped and brought back, for outage tests."""
from __future__ import annotations

import contextlib
from pathlib import Path

from tests.support.server import LiveServer, free_port, run_server


class Restarter:
    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.env = env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._ctx: contextlib.AbstractContextManager[LiveServer] | None = None
        self.live: LiveServer | None = None  # the running server, None while stopped
        self._runs = 0

    def start(self) -> LiveServer:
        """Start (again) on the same port; blocks until /readyz answers."""
        self._runs += 1
        log_dir = self.root / f"server-run{self._runs}"
        log_dir.mkdir(parents=True)
        ctx = run_server(log_dir, self.env, port=self.port)
        live = ctx.__enter__()
        self._ctx = ctx
        self.live = live
        return live

    def stop(self) -> None:
        ctx, self._ctx, self.live = self._ctx, None, None
        if ctx is not None:
            ctx.__exit__(None, None, None)
