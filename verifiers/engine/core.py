"""Runs items through the verifier contract (``verifiers.base``): the engine owns deadlines, dispatch, metrics and
the naming of failures, so a verifier only declares its options, prepares and checks.

What an item meets, in order:

1. **prepare**: look the verifier up, parse its options, run its prepare step (``validate``); these raise
   (``UnknownVerifier``, ``ValidationError``, ...) so the caller can refuse the item before anything runs;
2. **run**: inline, in a worker process, in a thread or on the event loop, under the item's deadline; whatever it
   raises becomes one named verdict (``failure_verdict``): none of them can surface as a score of 0;
3. **stages**: post-processing composed after the run (by default the calibration stage: appeals, noise correction);
4. **group pass**: group-level verifiers see the items of their request together (``verify_many`` only);
5. **report**: ``on_result`` once per top-level item. Nested checks (``Context.verify`` from inside a verifier or a
   stage) go through 1-4 but are never reported: the item that asked for them is.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from verifiers import conversation
from verifiers.base import BaseOptions, Prepared, Verifier
from verifiers.calibration.apply import CalibrationStage
from verifiers.context import Context, ResourceKey, Resources
from verifiers.engine.cancel import CancelScope
from verifiers.engine.failures import failure_verdict
from verifiers.engine.groups import finish_groups
from verifiers.engine.pool import WorkerPool
from verifiers.engine.registry import Registry
from verifiers.types import Verdict, VerifyItem

__all__ = ["Engine", "Prepared", "ResultHook", "Stage"]

log = logging.getLogger(__name__)

ResultHook = Callable[[str, Verdict], None]
VerdictHook = Callable[[int, Verdict], None]  # an item's index in its request, and its final verdict


class Stage(Protocol):
    """Post-processing of a raw verdict, composed after the engine's run (``Engine(stages=...)``)."""

    def applies(self, options: BaseOptions) -> bool: ...

    async def run(self, ctx: Context, p: Prepared, raw: Verdict) -> Verdict: ...


def default_stages() -> tuple[Stage, ...]:
    return (CalibrationStage(),)


class Engine:
    def __init__(
        self,
        registry: Registry,
        *,
        pool: WorkerPool | None = None,
        resources: Resources | Mapping[ResourceKey[Any], Any] | None = None,
        default_timeout_s: float = 10.0,
        max_timeout_s: float = 300.0,
        on_result: ResultHook | None = None,
        stages: Sequence[Stage] | None = None,
    ) -> None:
        self.registry = registry
        self.pool = pool
        self.resources = resources if isinstance(resources, Resources) else Resources(resources)
        self.default_timeout_s = default_timeout_s
        self.max_timeout_s = max_timeout_s
        self.on_result = on_result
        self.stages: tuple[Stage, ...] = default_stages() if stages is None else tuple(stages)
        self.context = Context(self.resources, self._nested, self._nested_many)
        self._warned_soft_deadline = False

    def prepare(self, item: VerifyItem) -> Prepared:
        """Look the verifier up and validate its options (raises ``UnknownVerifier`` / ``ValidationError``)."""
        verifier = self.registry.get(item.verifier)
        options = verifier.parse_options(item.options)
        verifier.validate(options, self.registry)
        return Prepared(item, verifier, options)

    def timeout_for(self, prepared: Prepared) -> float:
        wanted = prepared.options.timeout_s or prepared.verifier.default_timeout_s
        return min(float(wanted or self.default_timeout_s), self.max_timeout_s)

    async def verify(self, item: VerifyItem | Prepared, scope: CancelScope | None = None) -> Verdict:
        """One top-level item (no group pass: a group-level verifier scores it alone), reported to ``on_result``.
        With ``scope``, cancelling it stops the check and answers ``cancelled``."""
        prepared = self._prepared(item)
        verdict = await self._evaluate_top(prepared, scope)
        self._report(prepared, verdict)
        return verdict

    async def verify_many(self, items: Sequence[VerifyItem | Prepared], scope: CancelScope | None = None,
                          on_verdict: VerdictHook | None = None) -> list[Verdict]:
        """Top-level items of one request, each reported to ``on_result`` once its final verdict is known. With
        ``scope``, cancelling it drops the items still queued and stops those running, each answered ``cancelled``;
        the verdicts already decided are kept. ``on_verdict(index, verdict)`` is told each final verdict as soon as
        it is decided (a group-level item's after its group's pass), for callers that stream them."""
        prepared = [self._prepared(i) for i in items]
        verdicts = await self._evaluate_many(prepared, scope, on_verdict)
        for p, verdict in zip(prepared, verdicts):
            self._report(p, verdict)
        return verdicts

    def _prepared(self, item: VerifyItem | Prepared) -> Prepared:
        return item if isinstance(item, Prepared) else self.prepare(item)

    def _report(self, p: Prepared, verdict: Verdict) -> None:
        if self.on_result is not None:
            self.on_result(p.verifier.name, verdict)

    async def _nested(self, item: VerifyItem) -> Verdict:
        return await self._evaluate(self.prepare(item))

    async def _nested_many(self, items: Sequence[VerifyItem]) -> list[Verdict]:
        return await self._evaluate_many([self.prepare(i) for i in items])

    async def _evaluate(self, p: Prepared) -> Verdict:
        """Run, then the stages that apply; ``elapsed_ms`` counts both."""
        started = time.perf_counter()
        verdict = await self._run(p)
        verdict.elapsed_ms = (time.perf_counter() - started) * 1000.0
        for stage in self.stages:
            if stage.applies(p.options):
                raw_elapsed, started = verdict.elapsed_ms, time.perf_counter()
                verdict = await stage.run(self.context, p, verdict)
                verdict.elapsed_ms = raw_elapsed + (time.perf_counter() - started) * 1000.0
        return verdict

    async def _evaluate_top(self, p: Prepared, scope: CancelScope | None) -> Verdict:
        """A top-level item under its caller's scope. Nested checks are not guarded: they stop with the item that
        asked for them, which alone is answered ``cancelled``."""
        if scope is None:
            return await self._evaluate(p)
        return await scope.guard(self._evaluate(p), Verdict.cancelled)

    async def _evaluate_many(self, prepared: Sequence[Prepared], scope: CancelScope | None = None,
                             on_verdict: VerdictHook | None = None) -> list[Verdict]:
        out: list[Verdict | None] = [None] * len(prepared)
        waiting: list[int] = []

        async def told(i: int) -> Verdict:
            verdict = await self._evaluate_top(prepared[i], scope)
            if on_verdict is not None and not prepared[i].verifier.group_level:
                on_verdict(i, verdict)
            return verdict

        for i, p in enumerate(prepared):
            if self._runs_inline(p):
                out[i] = await told(i)  # completes without suspending: no task per item
            else:
                waiting.append(i)
        # Concurrent process-mode items are coalesced into chunks by the pool, so a plain gather batches them.
        for i, verdict in zip(waiting, await asyncio.gather(*(told(i) for i in waiting))):
            out[i] = verdict
        verdicts = [v for v in out if v is not None]
        if scope is not None and scope.cancelled:
            # the group pass needs every item of its group: a group-level item's reading is not its verdict
            verdicts = [Verdict.cancelled(scope.reason) if p.verifier.group_level else v
                        for p, v in zip(prepared, verdicts)]
        else:
            verdicts = await finish_groups(self.context, prepared, verdicts)
        if on_verdict is not None:
            for i, p in enumerate(prepared):
                if p.verifier.group_level:
                    on_verdict(i, verdicts[i])
        return verdicts

    def _runs_inline(self, p: Prepared) -> bool:
        """Cheap, linear-time checks on small inputs skip the process hop (see ``Verifier.inline_max_chars``)."""
        limit = p.verifier.inline_max_chars
        return (
            p.verifier.execution == "process"
            and limit > 0
            and len(p.item.response) <= limit
            and (not isinstance(p.item.reference, str) or len(p.item.reference) <= limit)
            and p.verifier.inline_ok(p.options)
            and not any(stage.applies(p.options) for stage in self.stages)
        )

    @staticmethod
    def _wire_options(p: Prepared) -> dict[str, Any]:
        return p.options.model_dump(mode="json", exclude_unset=True, by_alias=True)

    async def _run(self, p: Prepared) -> Verdict:
        timeout = self.timeout_for(p)
        try:
            return await self._dispatch(p, deadline_s=timeout)
        except Exception as exc:  # CancelledError is not an Exception: a cancelled request stays cancelled
            return failure_verdict(exc, p.verifier.name, timeout)

    async def _dispatch(self, p: Prepared, *, deadline_s: float) -> Verdict:
        # The trajectory is bound for whatever runs the check here: the task or thread started below copies it, and a
        # worker process gets it with the job.
        with conversation.bound(p.item.messages, p.item.tools):
            return await self._dispatch_bound(p, deadline_s=deadline_s)

    async def _dispatch_bound(self, p: Prepared, *, deadline_s: float) -> Verdict:
        verifier: Verifier[Any] = p.verifier
        if verifier.execution == "async":
            return await asyncio.wait_for(verifier.acheck(p.item.response, p.item.reference, p.options,
                                                          self.context), deadline_s)
        if self._runs_inline(p):
            return verifier.check(p.item.response, p.item.reference, p.options)
        if self.pool is not None:
            return await self.pool.run(verifier.name, p.item.response, p.item.reference, self._wire_options(p),
                                       deadline_s, messages=p.item.messages, tools=p.item.tools)
        # No pool: run in a thread; the deadline is then soft (the thread cannot be killed). Library code that needs
        # hard deadlines uses local_engine / LocalVerifier (verifiers.engine.local).
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(verifier.check, p.item.response, p.item.reference, p.options), deadline_s)
        except TimeoutError:
            if not self._warned_soft_deadline:
                self._warned_soft_deadline = True
                log.warning("a %s check overran its %gs deadline in a thread that cannot be stopped; use "
                            "verifiers.engine.local_engine() or LocalVerifier for hard deadlines", verifier.name,
                            deadline_s)
            raise

