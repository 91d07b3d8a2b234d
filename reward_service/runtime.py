"""Everything with a lifetime: the verifier registry, the worker pool, shared backends and the engine.

The HTTP app's lifespan and the CLI's embedded mode both open a ``Runtime``, so batch scoring in-process runs the
exact same code path as the server.
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from reward_service.settings import Settings
from verifiers.engine import Engine, ResultHook
from verifiers.pool import WorkerPool
from verifiers.registry import Registry, build_registry
from verifiers.spec import named_specs

log = logging.getLogger("reward_service.runtime")

# Backends shared by verifiers, each "module:function" where function(settings) is an async context manager that
# yields a dict of named resources. A resource with a boolean ``ready`` attribute gates /readyz.
RESOURCE_FACTORIES: tuple[str, ...] = (
    "reward_service.judge_resources:open_judges",
    "reward_service.reward_models:open_reward_models",
    "reward_service.calibration_resource:open_calibration",
    "reward_service.sandbox_resource:open_sandbox",
)

ResourceFactory = Callable[[Settings], AbstractAsyncContextManager[dict[str, Any]]]


def _load_factory(path: str) -> ResourceFactory:
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


@dataclass
class Runtime:
    settings: Settings
    registry: Registry
    pool: WorkerPool
    engine: Engine
    resources: dict[str, Any] = field(default_factory=dict)

    def not_ready(self) -> list[str]:
        """Names of things that are still starting (empty when ready)."""
        waiting = []
        if self.pool.stats.alive == 0:
            waiting.append("worker pool")
        for name, resource in self.resources.items():
            if getattr(resource, "ready", True) is False:
                reason = getattr(resource, "not_ready_reason", "")
                waiting.append(f"{name}: {reason}" if reason else name)
        return waiting

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: Settings, on_result: ResultHook | None = None) -> AsyncIterator[Runtime]:
        modules = list(settings.extra_verifier_modules)
        registry = build_registry(modules)
        from verifiers.registry import BUILTIN_MODULES

        specs = named_specs(settings.reward_specs)
        for spec in specs:
            registry.register(spec)
        for spec in specs:  # a misconfigured spec fails at start-up, not on the first request
            try:
                spec.validate(spec.Options(), registry)
            except Exception as exc:
                raise ValueError(f"reward spec {spec.name!r} is invalid: {exc}") from exc
        pool = WorkerPool(
            settings.effective_workers(),
            [*BUILTIN_MODULES, *modules],
            memory_mb=settings.worker_memory_mb,
            slow_after_s=settings.worker_slow_after_s,
            length_tokenizers=settings.length_tokenizers,
        )
        async with AsyncExitStack() as stack:
            await pool.start()
            stack.push_async_callback(pool.close)
            resources: dict[str, Any] = {}
            for path in RESOURCE_FACTORIES:
                resources.update(await stack.enter_async_context(_load_factory(path)(settings)))
            engine = Engine(
                registry,
                pool=pool,
                resources=resources,
                default_timeout_s=settings.item_timeout_s,
                max_timeout_s=settings.max_item_timeout_s,
                on_result=on_result,
            )
            yield cls(settings, registry, pool, engine, resources)
