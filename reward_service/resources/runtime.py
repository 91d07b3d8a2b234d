"""Everything with a lifetime: the verifier registry, the worker pool, shared backends and the engine.

The HTTP app's lifespan and the CLI's embedded mode both open a ``Runtime``, so batch scoring in-process runs the
exact same code path as the server.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from environments.sessions import SessionManager
from reward_service.resources.calibration import open_calibration
from reward_service.resources.environments import open_environments
from reward_service.resources.judges import open_judges
from reward_service.resources.lean import open_lean
from reward_service.resources.reward_models import open_reward_models
from reward_service.resources.sandbox import open_sandbox
from reward_service.settings import Settings
from verifiers.context import ResourceKey, Resources
from verifiers.engine import Engine, ResultHook
from verifiers.engine.pool import WorkerPool
from verifiers.engine.registry import Registry, build_registry
from verifiers.kinds.spec import named_specs

log = logging.getLogger(__name__)

ResourceFactory = Callable[[Settings], AbstractAsyncContextManager[Mapping[ResourceKey[Any], Any]]]

# Backends shared by verifiers: each factory(settings) is an async context manager that yields its resources under
# their typed keys. A resource that is ``Warming`` gates /readyz. Heavy libraries (torch, transformers) are
# imported inside the factories, only when configured.
RESOURCE_FACTORIES: tuple[ResourceFactory, ...] = (
    open_judges, open_reward_models, open_calibration, open_sandbox, open_lean)


@dataclass
class Runtime:
    settings: Settings
    registry: Registry
    pool: WorkerPool
    engine: Engine
    resources: Resources = field(default_factory=Resources)
    environments: SessionManager | None = None  # the sessions of /envs/{name} (reward_service/resources/environments)

    def not_ready(self) -> list[str]:
        """Names of things that are still starting (empty when ready)."""
        waiting = []
        if self.pool.stats.alive == 0:
            waiting.append("worker pool")
        waiting += [f"{name}: {reason}" if reason else name for name, reason in self.resources.waiting()]
        return waiting

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: Settings, on_result: ResultHook | None = None) -> AsyncIterator[Runtime]:
        modules = list(settings.execution.extra_verifier_modules)
        registry = build_registry(modules)
        from verifiers.engine.registry import BUILTIN_MODULES

        specs = named_specs(settings.composition.reward_specs)
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
            memory_mb=settings.execution.worker_memory_mb,
            slow_after_s=settings.execution.worker_slow_after_s,
            length_tokenizers=settings.shaping.length_tokenizers,
            sql_databases_dir=settings.sql.databases_dir,
        )
        async with AsyncExitStack() as stack:
            await pool.start()
            stack.push_async_callback(pool.close)
            resources = Resources()
            for factory in RESOURCE_FACTORIES:
                resources.add(await stack.enter_async_context(factory(settings)))
            engine = Engine(
                registry,
                pool=pool,
                resources=resources,
                default_timeout_s=settings.execution.item_timeout_s,
                max_timeout_s=settings.execution.max_item_timeout_s,
                on_result=on_result,
            )
            environments = await stack.enter_async_context(open_environments(settings, engine, resources))
            yield cls(settings, registry, pool, engine, resources, environments)
