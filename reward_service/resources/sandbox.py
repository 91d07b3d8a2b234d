"""The ``sandbox`` resource: one backend per service, built from settings, warm pool started in the lifespan."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reward_service.settings import Settings
from sandbox.bwrap import BwrapConfig
from sandbox.docker_backend import DockerConfig
from sandbox.factory import BACKENDS, BackendConfig, DisabledConfig, build_backend
from verifiers.context import SANDBOX, ResourceKey

log = logging.getLogger(__name__)


def backend_config(settings: Settings) -> BackendConfig:
    """The configured backend's own typed configuration, from the ``sandbox`` settings block."""
    s = settings.sandbox
    caps, defaults = s.caps.to_limits(), s.defaults.to_limits()
    if s.backend == "bwrap":
        return BwrapConfig(caps=caps, defaults=defaults, warm_pool=s.warm_pool, max_concurrent=s.max_concurrent,
                           reuse_runs=s.reuse_runs, languages=s.languages, uid_base=s.uid_base,
                           compile_wall_s=s.compile_wall_s, memory_cgroup=s.memory_cgroup,
                           session_warm_pool=settings.environments.session_warm_pool,
                           max_sessions=settings.environments.max_sessions)
    if s.backend == "docker":
        return DockerConfig(caps=caps, defaults=defaults, max_concurrent=s.max_concurrent)
    if s.backend == "none":
        return DisabledConfig()
    raise ValueError(f"unknown sandbox backend {s.backend!r}; choose one of {', '.join(BACKENDS)}")


@asynccontextmanager
async def open_sandbox(settings: Settings) -> AsyncIterator[dict[ResourceKey[Any], Any]]:
    backend = build_backend(backend_config(settings))
    if backend.reason:
        log.warning("sandbox unavailable: %s", backend.reason)
    await backend.start()
    try:
        yield {SANDBOX: backend}
    finally:
        await backend.close()
