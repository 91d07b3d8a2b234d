"""Helpers for benchmark scripts: start a real server process and drive it with concurrent HTTP clients."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.server import free_port

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout}s")


class ServiceUrl(str):
    """The service's URL, which also names its process (for ``cpu_seconds``)."""

    pid: int


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children alive now (the service's worker pool), from /proc:
    unlike a throughput on a shared machine, what a request costs the server does not move with the load."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                for c in (t / "children").read_text().split()]
    except OSError:
        return []


@contextlib.contextmanager
def service(env: dict[str, str] | None = None, cpus: set[int] | None = None) -> Iterator[ServiceUrl]:
    """The real service (``reward-service serve``) on a free loopback port; ``cpus``: the only cores it and its
    worker processes may run on (as a container's CPU limit would cap it)."""
    port = free_port()
    full_env = {**os.environ, "REWARD_SERVICE_LOG_LEVEL": "WARNING", **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reward_service", "serve", "--port", str(port)],
        env=full_env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    url = ServiceUrl(f"http://127.0.0.1:{port}")
    url.pid = proc.pid
    try:
        wait_ready(f"{url}/readyz", proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def uvicorn_app(app_path: str) -> Iterator[str]:
    """Any ASGI app ("module:attr") under uvicorn, same flags as the service."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", app_path, "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/healthz", proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def drive(url: str, path: str, payload: dict[str, Any], *, seconds: float, concurrency: int,
                encode_once: bool = False) -> int:
    """POST the payload as fast as ``concurrency`` clients can for ``seconds``; return completed requests.
    ``encode_once``: the body is written as JSON once, not by every request, so a large payload's figure is the
    server's cost rather than the load generator's (which shares the machine)."""
    body = json.dumps(payload).encode() if encode_once else None
    done = 0
    stop = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def loop() -> None:
            nonlocal done
            while time.perf_counter() < stop:
                if body is None:
                    r = await client.post(path, json=payload)
                else:
                    r = await client.post(path, content=body, headers={"content-type": "application/json"})
                r.raise_for_status()
                done += 1

        await asyncio.gather(*(loop() for _ in range(concurrency)))
    return done
