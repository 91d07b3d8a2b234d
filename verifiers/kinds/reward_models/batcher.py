"""Merging scoring requests from many concurrent callers into forward passes.

Every caller's sequences go into one queue (``Coalescer``, shared with the remote scorer). When the model is idle
the batcher waits at most ``max_wait_ms`` for company (less if the token budget is already full), then takes
everything queued, sorts it by length so that sequences of similar length share a batch (little padding), and cuts
it into batches whose padded size (rows x longest row) fits the token budget. Forward passes run one at a time on
a dedicated thread, so the event loop keeps accepting requests, and requests arriving meanwhile form the next round.

A batch that runs out of device memory is split in two and each half retried; a single sequence that still does
not fit fails alone with ``ModelOutOfMemory``. Nothing here imports torch: the runner is any callable.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from verifiers.kinds.reward_models.formats import Encoded

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[Encoded]], list[list[float]]]


class ModelOutOfMemory(Exception):
    """One sequence alone does not fit in device memory."""


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError / torch.cuda.OutOfMemoryError (by name: no torch import), MemoryError, or a
    RuntimeError carrying the allocator's message (older torch, other backends)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


@dataclass
class BatcherStats:
    batches: int = 0
    sequences: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    oom_splits: int = 0
    batch_sizes: list[int] = field(default_factory=list)


@dataclass
class _Pending:
    seq: Encoded
    future: asyncio.Future[list[float]]


def plan_batches(lengths: Sequence[int], max_tokens: int, max_size: int) -> list[list[int]]:
    """Indices grouped into batches: sorted by length, each batch's rows x longest row within ``max_tokens``
    (a sequence longer than the budget goes alone)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    batches: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i in order:
        w = max(width, lengths[i])
        if current and (w * (len(current) + 1) > max_tokens or len(current) >= max_size):
            batches.append(current)
            current, w = [], lengths[i]
        current.append(i)
        width = w
    if current:
        batches.append(current)
    return batches


class Coalescer:
    """Merges concurrent callers' sequences: each caller's sequences join one queue; when the scorer is idle it
    waits at most ``max_wait_ms`` for company (less once ``max_batch_tokens`` or ``max_batch_size`` is queued),
    then hands everything queued to ``_dispatch``. Subclasses say how a batch is scored."""

    def __init__(self, *, max_batch_tokens: int, max_batch_size: int, max_wait_ms: float) -> None:
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_ms / 1000.0
        self._queue: list[_Pending] = []
        self._queued_tokens = 0
        self._arrived = asyncio.Event()
        self._full = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _stop(self, reason: BaseException) -> None:
        """Stop taking work; what is still queued fails with ``reason``."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        for p in self._queue:
            if not p.future.done():
                p.future.set_exception(reason)
        self._queue.clear()

    async def score(self, seqs: Sequence[Encoded]) -> list[list[float] | BaseException]:
        """Scores per sequence, or the exception that sequence's batch ended with (one bad batch never fails
        the others)."""
        self.start()
        loop = asyncio.get_running_loop()
        pending = [_Pending(s, loop.create_future()) for s in seqs]
        self._queue.extend(pending)
        self._queued_tokens += sum(len(s) for s in seqs)
        self._arrived.set()
        if self._queued_tokens >= self.max_batch_tokens or len(self._queue) >= self.max_batch_size:
            self._full.set()
        return list(await asyncio.gather(*(p.future for p in pending), return_exceptions=True))

    async def _loop(self) -> None:
        while True:
            await self._arrived.wait()
            if not self._full.is_set() and self.max_wait_s > 0:
                try:
                    await asyncio.wait_for(self._full.wait(), self.max_wait_s)
                except TimeoutError:
                    pass
            taken, self._queue = self._queue, []
            self._queued_tokens = 0
            self._arrived.clear()
            self._full.clear()
            taken = [p for p in taken if not p.future.done()]  # callers that gave up (deadline) are skipped
            if taken:
                await self._dispatch(taken)

    def _plan(self, taken: list[_Pending]) -> list[list[_Pending]]:
        plan = plan_batches([len(p.seq) for p in taken], self.max_batch_tokens, self.max_batch_size)
        return [[taken[i] for i in indices] for indices in plan]

    async def _dispatch(self, taken: list[_Pending]) -> None:
        raise NotImplementedError

    @staticmethod
    def _settle(p: _Pending, value: list[float] | BaseException) -> None:
        if p.future.done():
            return
        if isinstance(value, BaseException):
            p.future.set_exception(value)
        else:
            p.future.set_result(value)


class Batcher(Coalescer):
    """Forward passes of a local model, one at a time on a dedicated thread."""

    def __init__(
        self,
        runner: Runner,
        *,
        max_batch_tokens: int,
        max_batch_size: int = 256,
        max_wait_ms: float = 5.0,
        on_oom: Callable[[], None] | None = None,
        name: str = "model",
    ) -> None:
        super().__init__(max_batch_tokens=max_batch_tokens, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms)
        self.runner = runner
        self.on_oom = on_oom
        self.stats = BatcherStats()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"rm-{name}")

    async def close(self) -> None:
        await self._stop(RuntimeError("reward model is shutting down"))
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _dispatch(self, taken: list[_Pending]) -> None:
        for batch in self._plan(taken):
            await self._run(batch)

    async def _run(self, batch: list[_Pending]) -> None:
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(self._executor, self.runner, [p.seq for p in batch])
        except Exception as exc:
            if is_out_of_memory(exc):
                if self.on_oom is not None:
                    self.on_oom()
                if len(batch) == 1:
                    self._settle(batch[0], ModelOutOfMemory(
                        f"a sequence of {len(batch[0].seq)} tokens does not fit in device memory"))
                    return
                self.stats.oom_splits += 1
                half = len(batch) // 2
                log.warning("out of memory on a batch of %d sequences; splitting", len(batch))
                await self._run(batch[:half])
                await self._run(batch[half:])
                return
            log.exception("reward model batch failed")
            for p in batch:
                self._settle(p, exc)
            return
        self.stats.batches += 1
        self.stats.sequences += len(batch)
        self.stats.real_tokens += sum(len(p.seq) for p in batch)
        self.stats.padded_tokens += len(batch) * max(len(p.seq) for p in batch)
        self.stats.batch_sizes.append(len(batch))
        del self.stats.batch_sizes[:-1000]
        for p, r in zip(batch, results):
            self._settle(p, r)
