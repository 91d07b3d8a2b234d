"""A completion cache with in-flight de-duplication: identical judge prompts (a GRPO group's repeated answers)
cost one call, even when they arrive at the same moment."""
from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

Source = Literal["call", "cache", "joined"]


def cache_key(backend: str, model: str, messages: Any, sampling: dict[str, Any]) -> str:
    blob = json.dumps([backend, model, messages, sampling], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class CacheStats:
    calls: int = 0
    hits: int = 0
    joined: int = 0


class CompletionCache:
    """LRU of finished completions plus the calls still in flight. ``max_entries=0`` turns both off."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.stats = CacheStats()
        self._done: OrderedDict[str, str] = OrderedDict()
        self._inflight: dict[str, asyncio.Task[str]] = {}
        self._waiting: Counter[str] = Counter()  # callers awaiting each in-flight call

    def __len__(self) -> int:
        return len(self._done)

    async def get_or_call(self, key: str, call: Callable[[], Awaitable[str]]) -> tuple[str, Source]:
        if self.max_entries <= 0:
            self.stats.calls += 1
            return await call(), "call"
        if key in self._done:
            self._done.move_to_end(key)
            self.stats.hits += 1
            return self._done[key], "cache"
        task = self._inflight.get(key)
        source: Source = "joined"
        if task is None:
            task = asyncio.ensure_future(call())
            self._inflight[key] = task
            task.add_done_callback(functools.partial(self._settle, key))
            self.stats.calls += 1
            source = "call"
        else:
            self.stats.joined += 1
        # shield: one caller hitting its deadline must not cancel the call the others are waiting on; once the last
        # one has given up, the call is cancelled, so it does not spend a rate-limited turn on an answer nobody reads
        self._waiting[key] += 1
        try:
            return await asyncio.shield(task), source
        finally:
            self._waiting[key] -= 1
            if self._waiting[key] <= 0:
                del self._waiting[key]
                if not task.done():
                    task.cancel()

    def _settle(self, key: str, task: asyncio.Task[str]) -> None:
        self._inflight.pop(key, None)
        if task.cancelled() or task.exception() is not None:  # failures are not remembered: the next try calls
            return
        self._done[key] = task.result()
        self._done.move_to_end(key)
        while len(self._done) > self.max_entries:
            self._done.popitem(last=False)
