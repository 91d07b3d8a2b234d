"""Shared pieces of the judge tests: run items through a real Engine whose ``judges`` resource talks HTTP to the
fake OpenAI server."""
from __future__ import annotations

import asyncio
from typing import Any

from verifiers.engine import Engine
from verifiers.engine.registry import load_modules
from verifiers.kinds.judges.backends import OpenAIChatBackend
from verifiers.kinds.judges.registry import JudgeRegistry
from verifiers.types import Verdict, VerifyItem

API_KEY = "sk-test-7f3a9c"
MODULES = ["verifiers.kinds.basic", "verifiers.kinds.judges"]


def judge_backend(url: str, name: str = "default", **kw: Any) -> OpenAIChatBackend:
    opts = {"max_retries": 2, "backoff_s": 0.01, "backoff_max_s": 2.0, "timeout_s": 5.0, **kw}
    return OpenAIChatBackend(name, url, "judge-model", API_KEY, **opts)


def run_items(url: str, items: list[VerifyItem], *, cache_size: int = 1000, rounds: int = 1,
              modules: list[str] | None = None, **backend_kw: Any) -> list[list[Verdict]]:
    """Each round verifies all items concurrently; the cache lives across rounds (one registry)."""
    async def go() -> list[list[Verdict]]:
        judges = JudgeRegistry({"default": judge_backend(url, **backend_kw)}, cache_size=cache_size)
        await judges.start()
        engine = Engine(load_modules(modules or MODULES), resources={"judges": judges}, default_timeout_s=60)
        try:
            return [await engine.verify_many(items) for _ in range(rounds)]
        finally:
            await judges.aclose()

    return asyncio.run(go())


def verify(url: str, verifier: str, response: str, reference: Any, **options: Any) -> Verdict:
    return run_items(url, [VerifyItem(verifier, response, reference, options)])[0][0]
