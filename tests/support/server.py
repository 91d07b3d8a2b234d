"""A real server for tests (uvicorn in a subprocess on a free loopback port), and where the repository and the shared
data sets are."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


def chromium_dom(url: str, profile: Path, *flags: str, what: str = "the page", timeout: float = 120) -> str:
    """The DOM of ``url`` after its scripts ran, from headless chromium in a fresh profile (``profile``: no cached
    bundle); ``flags`` add to chromium's own. Skips where chromium is absent (scripts/setup.sh installs it)."""
    if CHROMIUM is None:
        pytest.skip(f"chromium is not installed (scripts/setup.sh installs it): cannot render {what}")
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", *flags, "--dump-dom", url],
        capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


TEST_PLUGINS = "tests.support.plugins.testing_verifiers"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveServer:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kwargs.pop("timeout", 60.0), **kwargs)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def verify(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """POST /v1/verify; the results of a 200 answer (anything else fails the test)."""
        with self.client() as c:
            r = c.post("/v1/verify", json={"items": items})
        assert r.status_code == 200, r.text
        results: list[dict[str, Any]] = r.json()["results"]
        return results


@contextlib.contextmanager
def run_server(tmp_path: Path, env: dict[str, str] | None = None, ready_timeout: float = 120.0,
               port: int | None = None, python: str | None = None) -> Iterator[LiveServer]:
    """Start ``reward-service serve`` for real and wait until /readyz says ready (on ``port``, else a free one;
    with ``python``, another interpreter, e.g. a venv's)."""
    port = port or free_port()
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "REWARD_SERVICE_EXTRA_VERIFIER_MODULES": f'["{TEST_PLUGINS}"]',
        "REWARD_SERVICE_WORKERS": "2",
        "REWARD_SERVICE_JOBS_STORE": str(tmp_path / "jobs.sqlite3"),  # a store of its own (a test may name one)
        **(env or {}),
    }
    log_path = tmp_path / f"server-{port}.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [python or sys.executable, "-m", "reward_service", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=full_env, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT,
        )
    server = LiveServer(f"http://127.0.0.1:{port}", proc, log_path)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}:\n{server.log()}")
            try:
                if httpx.get(f"{server.url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not ready after {ready_timeout}s:\n{server.log()}")
            time.sleep(0.1)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def run_env_server(tmp_path: Path, env: dict[str, str] | None = None) -> Iterator[LiveServer]:
    """A server whose environments are ready to use: the sql verifier's databases built under ``tmp_path``."""
    from tests.support.sql import build_databases

    databases = build_databases(tmp_path / "databases")
    with run_server(tmp_path, {"REWARD_SERVICE_SQL_DATABASES_DIR": str(databases), **(env or {})}) as live:
        yield live


def requests_to(url: str, route: str = "/v1/verify") -> int:
    """How many requests to ``route`` the server at ``url`` has answered so far, any status."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    pattern = r'^reward_requests_total\{[^}]*route="' + re.escape(route) + r'"[^}]*\} ([0-9.e+]+)$'
    return int(sum(float(m) for m in re.findall(pattern, text, flags=re.M)))
