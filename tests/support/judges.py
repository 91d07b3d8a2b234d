"""Shared pieces of the judge tests: run items through a real Engine whose ``judges`` resource talks HTTP to the
fake OpenAI server."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from verifiers.engine import Engine
from verifiers.engine.registry import load_modules
from verifiers.kinds.judges.backends import OpenAIChatBackend
from verifiers.kinds.judges.registry import JUDGES, JudgeRegistry
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
        engine = Engine(load_modules(modules or MODULES), resources={JUDGES: judges}, default_timeout_s=60)
        try:
            return [await engine.verify_many(items) for _ in range(rounds)]
        finally:
            await judges.aclose()

    return asyncio.run(go())


def verify(url: str, verifier: str, response: str, reference: Any, **options: Any) -> Verdict:
    return run_items(url, [VerifyItem(verifier, response, reference, options)])[0][0]


class ManualClock:
    """A clock for ``RateLimiter`` that moves only when ``drive`` jumps it to the next sleeper's deadline, once
    every runnable task has run: window logic over minutes is checked exactly, in milliseconds."""

    def __init__(self) -> None:
        self.t = 0.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.t + seconds, future)
        self._sleepers.append(entry)
        try:
            await future
        finally:
            self._sleepers.remove(entry)

    def jump(self) -> bool:
        """Advance to the earliest deadline and wake those due; False when nobody sleeps."""
        pending = [(at, f) for at, f in self._sleepers if not f.done()]
        if not pending:
            return False
        self.t = max(self.t, min(at for at, _ in pending))
        for at, future in pending:
            if at <= self.t:
                future.set_result(None)
        return True

    async def drive(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Run ``tasks`` to the end, jumping time whenever all of them wait on the clock."""
        while not all(t.done() for t in tasks):
            for _ in range(50):
                await asyncio.sleep(0)
            if all(t.done() for t in tasks):
                break
            if not self.jump():
                raise AssertionError("tasks wait on something other than the clock")
        for t in tasks:
            t.result()


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Poll ``condition`` (state another thread changes, such as the double's call count)."""
    for _ in range(int(timeout_s / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not met in time")
