"""The ``sandbox`` resource: one backend per service, built from settings, warm pool started in the lifespan."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reward_service.settings import Settings
from sandbox.factory import build_backend

log = logging.getLogger(__name__)


def backend_config(settings: Settings) -> dict[str, Any]:
    return {
        "backend": settings.sandbox.backend,
        "caps": settings.sandbox.caps.to_limits(),
        "defaults": settings.sandbox.defaults.to_limits(),
        "warm_pool": settings.sandbox.warm_pool,
        "max_concurrent": settings.sandbox.max_concurrent,
        "reuse_runs": settings.sandbox.reuse_runs,
        "languages": settings.sandbox.languages,
        "uid_base": settings.sandbox.uid_base,
        "compile_wall_s": settings.sandbox.compile_wall_s,
        "memory_cgroup": settings.sandbox.memory_cgroup,
    }


@asynccontextmanager
async def open_sandbox(settings: Settings) -> AsyncIterator[dict[str, Any]]:
    backend = build_backend(backend_config(settings))
    reason = getattr(backend, "reason", "")
    if reason:
        log.warning("sandbox unavailable: %s", reason)
    start = getattr(backend, "start", None)
    if start is not None:
        await start()
    try:
        yield {"sandbox": backend}
    finally:
        await backend.close()
