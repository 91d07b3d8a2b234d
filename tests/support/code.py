"""Shared by the code-verifier tests: the real engine over the real bubblewrap sandbox, on a private event loop."""
from __future__ import annotations

import asyncio
import gc
import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.bwrap import BwrapBackend, BwrapConfig
from verifiers.context import SANDBOX
from verifiers.engine import Engine
from verifiers.engine.registry import build_registry
from verifiers.types import Verdict, VerifyItem


class CodeRunner:
    def __init__(self, warm_pool: int = 2) -> None:
        self.loop = asyncio.new_event_loop()
        self.backend = BwrapBackend(BwrapConfig(warm_pool=warm_pool))
        self.loop.run_until_complete(self.backend.start())
        self.engine = Engine(build_registry(), resources={SANDBOX: self.backend}, max_timeout_s=600)

    def verify(self, response: str, reference: Any, **options: Any) -> Verdict:
        return self.many([(response, reference)], **options)[0]

    def many(self, pairs: list[tuple[str, Any]], **options: Any) -> list[Verdict]:
        items = [VerifyItem("code", response, reference, dict(options)) for response, reference in pairs]
        return self.loop.run_until_complete(self.engine.verify_many(items))

    def close(self) -> None:
        self.loop.run_until_complete(self.backend.close())
        gc.collect()  # finalise the backend's subprocess transports while their loop is still open
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()


def runner_fixture(warm_pool: int = 2) -> Callable[[], Iterator[CodeRunner]]:
    """A module-scoped ``runner`` fixture: one engine and sandbox pool for all the tests of a module."""
    @pytest.fixture(scope="module")
    def runner() -> Iterator[CodeRunner]:
        r = CodeRunner(warm_pool)
        yield r
        r.close()

    return runner


def statuses(verdict: Verdict) -> list[str]:
    return [t["status"] for t in verdict.details["tests"]]


def humaneval(data: Path) -> list[dict[str, Any]]:
    with gzip.open(data / "code" / "HumanEval.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def mbpp(data: Path) -> list[dict[str, Any]]:
    with open(data / "code" / "mbpp.jsonl") as f:
        return [json.loads(line) for line in f]


def humaneval_reference(task: dict[str, Any]) -> dict[str, Any]:
    return {"test": task["test"], "entry_point": task["entry_point"], "prompt": task["prompt"]}


def mbpp_reference(task: dict[str, Any]) -> dict[str, Any]:
    return {"test_list": task["test_list"], "test_setup_code": task["test_setup_code"]}
