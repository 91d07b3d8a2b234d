"""Routes items to verifiers, enforces deadlines and turns every failure into a named verdict.

The engine is the one place where "what went wrong" is decided: a verifier exception is ``error``, a missing
backend is ``unavailable``, an overrun is ``timeout``; none of them can surface as a score of 0.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from verifiers.base import BaseOptions, Verifier
from verifiers.calibration.apply import postprocess, wants_postprocess
from verifiers.context import Context
from verifiers.group_level import finish_groups
from verifiers.pool import WorkerPool
from verifiers.registry import Registry
from verifiers.types import InvalidReference, Verdict, VerifierUnavailable, VerifyItem

log = logging.getLogger("reward_service.engine")

ResultHook = Callable[[str, Verdict], None]


@dataclass
class Prepared:
    item: VerifyItem
    verifier: Verifier
    options: BaseOptions


class Engine:
    def __init__(
        self,
        registry: Registry,
        *,
        pool: WorkerPool | None = None,
        resources: dict[str, Any] | None = None,
        default_timeout_s: float = 10.0,
        max_timeout_s: float = 300.0,
        on_result: ResultHook | None = None,
    ) -> None:
        self.registry = registry
        self.pool = pool
        self.resources = resources if resources is not None else {}
        self.default_timeout_s = default_timeout_s
        self.max_timeout_s = max_timeout_s
        self.on_result = on_result
        self.context = Context(engine=self, resources=self.resources)
        self._warned_soft_deadline = False

    @staticmethod
    def local(*args: Any, **kwargs: Any) -> AbstractAsyncContextManager[Engine]:
        """``async with Engine.local() as engine``: library use with hard deadlines (``verifiers.local``)."""
        from verifiers.local import local_engine

        return local_engine(*args, **kwargs)

    def prepare(self, item: VerifyItem) -> Prepared:
        """Look the verifier up and validate its options (raises ``UnknownVerifier`` / ``ValidationError``)."""
        verifier = self.registry.get(item.verifier)
        options = verifier.parse_options(item.options)
        verifier.validate(options, self.registry)
        return Prepared(item, verifier, options)

    def timeout_for(self, prepared: Prepared) -> float:
        wanted = prepared.options.timeout_s or prepared.verifier.default_timeout_s
        return min(float(wanted or self.default_timeout_s), self.max_timeout_s)

    async def verify(self, item: VerifyItem | Prepared) -> Verdict:
        prepared = item if isinstance(item, Prepared) else self.prepare(item)
        started = time.perf_counter()
        verdict = await self._run(prepared)
        verdict.elapsed_ms = (time.perf_counter() - started) * 1000.0
        return await self._finish(prepared, verdict)

    async def _finish(self, prepared: Prepared, verdict: Verdict) -> Verdict:
        if wants_postprocess(prepared.options):  # appeal / noise correction (issue 9), on the raw verdict
            started = time.perf_counter()
            raw_elapsed = verdict.elapsed_ms
            verdict = await postprocess(self, prepared, verdict)
            verdict.elapsed_ms = raw_elapsed + (time.perf_counter() - started) * 1000.0
        if self.on_result is not None and not prepared.verifier.group_level:  # those report after their group pass
            self.on_result(prepared.verifier.name, verdict)
        return verdict

    async def verify_many(self, items: Sequence[VerifyItem | Prepared]) -> list[Verdict]:
        prepared = [i if isinstance(i, Prepared) else self.prepare(i) for i in items]
        out: list[Verdict | None] = [None] * len(prepared)
        waiting: list[int] = []
        for i, p in enumerate(prepared):
            if self._runs_inline(p):
                out[i] = await self.verify(p)  # completes without suspending: no task per item
            else:
                waiting.append(i)
        # Concurrent process-mode items are coalesced into chunks by the pool, so a plain gather batches them.
        for i, verdict in zip(waiting, await asyncio.gather(*(self.verify(prepared[i]) for i in waiting))):
            out[i] = verdict
        return await finish_groups(self, prepared, [v for v in out if v is not None])

    def _runs_inline(self, p: Prepared) -> bool:
        """Cheap, linear-time checks on small inputs skip the process hop (see ``Verifier.inline_max_chars``)."""
        limit = p.verifier.inline_max_chars
        return (
            p.verifier.execution == "process"
            and limit > 0
            and len(p.item.response) <= limit
            and (not isinstance(p.item.reference, str) or len(p.item.reference) <= limit)
            and p.verifier.inline_ok(p.options)
            and not wants_postprocess(p.options)
        )

    @staticmethod
    def _wire_options(p: Prepared) -> dict[str, Any]:
        return p.options.model_dump(mode="json", exclude_unset=True, by_alias=True)

    async def _run(self, p: Prepared) -> Verdict:
        timeout = self.timeout_for(p)
        verifier = p.verifier
        try:
            if verifier.execution == "process":
                if self._runs_inline(p):
                    return verifier.check(p.item.response, p.item.reference, p.options)
                if self.pool is not None:
                    return await self.pool.run(
                        verifier.name, p.item.response, p.item.reference, self._wire_options(p), timeout
                    )
                # No pool: run in a thread; the deadline is then soft (the thread cannot be killed). Library code
                # that needs hard deadlines uses Engine.local / verifiers.local.LocalVerifier.
                coro = asyncio.to_thread(verifier.check, p.item.response, p.item.reference, p.options)
            else:
                coro = verifier.acheck(p.item.response, p.item.reference, p.options, self.context)
            return await asyncio.wait_for(coro, timeout)
        except TimeoutError:
            if verifier.execution == "process" and not self._warned_soft_deadline:
                self._warned_soft_deadline = True
                log.warning("a %s check overran its %gs deadline in a thread that cannot be stopped; use "
                            "Engine.local() or verifiers.local.LocalVerifier for hard deadlines", verifier.name, timeout)
            return Verdict.timeout(f"check exceeded its {timeout:g}s deadline")
        except InvalidReference as exc:
            return Verdict.invalid_reference(str(exc))
        except VerifierUnavailable as exc:
            return Verdict.unavailable(str(exc))
        except Exception as exc:
            log.exception("verifier %s failed", verifier.name)
            return Verdict.error(f"verifier raised {type(exc).__name__}: {str(exc)[:300]}")


def verify_sync(item: VerifyItem, registry: Registry | None = None) -> Verdict:
    """One check, for scripts and notebooks. With the built-in verifiers the deadline is hard: a check that is not
    cheap runs in a worker subprocess started for this call (1-2 s; ``LocalVerifier`` keeps one for many calls).
    A hand-built ``registry`` runs its checks in a thread, where the deadline is soft."""
    if registry is not None:
        return asyncio.run(Engine(registry).verify(item))
    from verifiers.local import LocalVerifier

    with LocalVerifier() as local:
        return local.verify(item)
