"""Client-side helpers: the scripted server started for real, its script and call log, a fast retry policy, and
loading a trainer's reward module as the trainer itself does."""
from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
from reward_client import (
    RetryPolicy,
)

from tests.support.server import ROOT, free_port


def load_like_verl(path: str):
    """verl's get_custom_reward_fn: spec_from_file_location + exec_module, then getattr(module, name)."""
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FAST = RetryPolicy(attempts=5, base_delay_s=0.05, max_delay_s=0.2)


def script(url: str, answers: list[dict], max_items: int | None = None) -> None:
    httpx.post(f"{url}/script", json={"answers": answers, "max_items": max_items}).raise_for_status()


def calls(url: str) -> list[dict]:
    return httpx.get(f"{url}/calls").json()


@contextlib.contextmanager
def scripted_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "tests.support.scripted_app:app", "--port", str(port),
         "--log-level", "warning"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "scripted server did not start"
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
