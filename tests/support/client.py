"""Client-side helpers: the scripted server on loopback (served as every double is), its script and call log, a fast
retry policy, and loading a trainer's reward module as the trainer itself does."""
from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from reward_client import (
    RetryPolicy,
)

from tests.support.fakes.http_double import serve_double


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


@dataclass
class _Scripted:
    app: Any
    url: str = ""


@contextlib.contextmanager
def scripted_server() -> Iterator[str]:
    """The scripted app served on loopback, its script and call log empty; yields its base URL."""
    from tests.support import scripted_app

    scripted_app.STATE.update(script=[], calls=[], max_items=None)
    with serve_double(_Scripted(scripted_app.app)) as double:
        yield double.url
