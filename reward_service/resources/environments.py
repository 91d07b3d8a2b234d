"""The environments' session manager: opened after the engine (its rewards are the engine's verdicts) on the
service's sandbox backend, with the ``environments`` settings block; its reaper runs while the service does."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from environments.base import EnvResources
from environments.registry import BUILTIN_MODULES, load_environments
from environments.rewards import EngineScorer
from environments.sessions import EnvSettings, SessionManager
from reward_service.settings import Settings
from sandbox.api import Backend
from verifiers.context import SANDBOX, Resources
from verifiers.engine import Engine


@asynccontextmanager
async def open_environments(settings: Settings, engine: Engine, resources: Resources) -> AsyncIterator[SessionManager]:
    e = settings.environments
    sandbox = resources.get(SANDBOX)
    env_resources = EnvResources(
        sandbox=sandbox if isinstance(sandbox, Backend) else None,
        sql_databases_dir=settings.sql.databases_dir,
        python_limits={"memory_mb": e.python_memory_mb, "disk_mb": e.python_disk_mb, "processes": e.python_processes,
                       "cpu_s": e.python_cpu_s, "output_bytes": e.python_output_bytes, "wall_s": e.lifetime_s + 60},
        python_network=e.python_network, sql_max_rows=e.sql_max_rows, bfcl_warm_workers=e.bfcl_warm_workers)
    manager = SessionManager(
        load_environments([*BUILTIN_MODULES, *e.modules]), env_resources,
        EnvSettings(idle_ttl_s=e.idle_ttl_s, lifetime_s=e.lifetime_s, max_sessions=e.max_sessions,
                    max_sessions_per_client=e.max_sessions_per_client, step_timeout_s=e.step_timeout_s,
                    max_step_timeout_s=e.max_step_timeout_s, retry_after_s=settings.limits.retry_after_s,
                    instance=e.instance_id),
        scorer=EngineScorer(engine))
    await manager.start()
    try:
        yield manager
    finally:
        try:
            await manager.close()
        finally:
            await env_resources.close()
