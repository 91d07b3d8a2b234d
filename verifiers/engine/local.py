"""Library use with hard deadlines: an engine whose process-mode checks run in its own worker subprocess.

A check run in a thread cannot be stopped: past its deadline it gets its ``timeout`` verdict but keeps burning a
core, and ``asyncio.run`` waits for it at exit. ``local_engine``/``LocalVerifier`` send those checks to a
small ``WorkerPool`` instead, started on the first check that needs it (cheap inline checks never start one); an
overrun kills and replaces the worker, and leaving the context kills it, so no thread or child outlives the call.
Forking per check was tried and reverted: 9 ms per check, and a verifier's state changed in a throw-away child.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

from verifiers.engine.core import Engine
from verifiers.engine.pool import Job, WorkerPool
from verifiers.engine.registry import BUILTIN_MODULES, Registry, load_modules
from verifiers.types import Verdict, VerifyItem


class LazyPool(WorkerPool):
    """A ``WorkerPool`` that starts its workers on the first job. Start-up (1-2 s of imports) is not counted
    against that job's deadline; a start that fails answers ``unavailable``, and the next job tries again."""

    def __init__(self, size: int, modules: Sequence[str], **kwargs: Any) -> None:
        super().__init__(size, modules, **kwargs)
        self._started = False
        self._starting: asyncio.Lock | None = None

    async def submit(self, job: Job) -> Verdict:
        if not self._started and not self._closed:
            try:
                await self._start_once()
            except Exception as exc:
                return Verdict.unavailable(f"the local verifier worker could not start: {exc}")
            job.admitted = time.monotonic()
        return await super().submit(job)

    async def _start_once(self) -> None:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if not self._started:
                await self.start()
                self._started = True


@asynccontextmanager
async def local_engine(
    modules: Sequence[str] | None = None,
    *,
    extra_modules: Sequence[str] = (),
    workers: int = 1,
    memory_mb: int = 0,
    **engine_kwargs: Any,
) -> AsyncIterator[Engine]:
    """An ``Engine`` over ``modules`` (default: the built-in ones) plus ``extra_modules`` whose process-mode checks
    run in ``workers`` subprocesses under hard deadlines; the workers are killed when the block ends.

    The workers import the verifiers by module name, so a verifier registered by hand on ``engine.registry`` is
    unknown to them (its checks come back as ``error``)."""
    names = [*(BUILTIN_MODULES if modules is None else modules), *extra_modules]
    pool = LazyPool(workers, names, memory_mb=memory_mb)
    try:
        yield Engine(load_modules(names), pool=pool, **engine_kwargs)
    finally:
        await pool.close()


class LocalVerifier:
    """``local_engine`` for synchronous code: one event loop and one worker serve every call of the block::

        with LocalVerifier() as v:
            verdicts = [v.verify(item) for item in items]
    """

    def __init__(self, modules: Sequence[str] | None = None, **kwargs: Any) -> None:
        self._context = local_engine(modules, **kwargs)
        self._runner: asyncio.Runner | None = None
        self.engine: Engine | None = None

    def __enter__(self) -> LocalVerifier:
        self._runner = asyncio.Runner()
        try:
            self.engine = self._runner.run(self._context.__aenter__())
        except BaseException:
            self._runner.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._runner is not None
        try:
            self._runner.run(self._context.__aexit__(kind, exc, tb))
        finally:
            self._runner.close()

    def verify(self, item: VerifyItem) -> Verdict:
        assert self._runner is not None and self.engine is not None, "use LocalVerifier in a with block"
        return self._runner.run(self.engine.verify(item))

    def verify_many(self, items: Sequence[VerifyItem]) -> list[Verdict]:
        assert self._runner is not None and self.engine is not None, "use LocalVerifier in a with block"
        return self._runner.run(self.engine.verify_many(items))


def verify_sync(item: VerifyItem, registry: Registry | None = None) -> Verdict:
    """One check, for scripts and notebooks. With the built-in verifiers the deadline is hard: a check that is not
    cheap runs in a worker subprocess started for this call (1-2 s; ``LocalVerifier`` keeps one for many calls).
    A hand-built ``registry`` runs its checks in a thread, where the deadline is soft."""
    if registry is not None:
        return asyncio.run(Engine(registry).verify(item))
    with LocalVerifier() as local:
        return local.verify(item)
