"""The ``judges`` resource: named judge backends built from settings, opened with the server and closed with it."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reward_service.settings import Settings
from verifiers.context import ResourceKey
from verifiers.kinds.judges.backends import JudgeBackend
from verifiers.kinds.judges.config import OpenAIBackendConfig, TransformersBackendConfig
from verifiers.kinds.judges.registry import JUDGES, BackendDefaults, JudgeRegistry, build_backend

log = logging.getLogger(__name__)


def judge_configs(settings: Settings) -> dict[str, OpenAIBackendConfig | TransformersBackendConfig]:
    """'default' from the REWARD_SERVICE_JUDGE_* variables, 'local' from judge_local_model, then the named ones."""
    configs: dict[str, OpenAIBackendConfig | TransformersBackendConfig] = {}
    if settings.judges.base_url:
        if not settings.judges.model:
            raise ValueError("REWARD_SERVICE_JUDGE_BASE_URL is set but REWARD_SERVICE_JUDGE_MODEL is not")
        configs["default"] = OpenAIBackendConfig(
            base_url=settings.judges.base_url, model=settings.judges.model, api_key=settings.judges.api_key,
            requests_per_minute=settings.judges.requests_per_minute,
            tokens_per_minute=settings.judges.tokens_per_minute)
    if settings.judges.local_model:
        configs["local"] = TransformersBackendConfig(
            model_path=settings.judges.local_model, device=settings.judges.local_device)
    configs.update(settings.judges.backends)
    return configs


def build_judges(settings: Settings) -> JudgeRegistry:
    defaults = BackendDefaults(
        max_concurrency=settings.judges.max_concurrency, timeout_s=settings.judges.timeout_s,
        max_retries=settings.judges.max_retries, backoff_s=settings.judges.backoff_s,
        backoff_max_s=settings.judges.backoff_max_s,
    )
    backends: dict[str, JudgeBackend] = {
        name: build_backend(name, config, defaults) for name, config in judge_configs(settings).items()
    }
    return JudgeRegistry(backends, settings.judges.default_backend, settings.judges.cache_size)


@asynccontextmanager
async def open_judges(settings: Settings) -> AsyncIterator[dict[ResourceKey[Any], Any]]:
    judges = build_judges(settings)
    await judges.start()
    log.info("judge backends: %s (default %s)", ", ".join(map(repr, judges.backends.values())) or "none",
             judges.default)
    try:
        yield {JUDGES: judges}
    finally:
        await judges.aclose()
