"""The named judge backends of one server (or one library user), with their shared completion cache."""
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from verifiers.context import ResourceKey
from verifiers.kinds.judges.backends import JudgeBackend, Messages, OpenAIChatBackend, Sampling, TransformersBackend
from verifiers.kinds.judges.cache import CompletionCache, Source, cache_key
from verifiers.kinds.judges.config import OpenAIBackendConfig, TransformersBackendConfig
from verifiers.kinds.judges.ratelimit import LimiterStats
from verifiers.types import VerifierUnavailable


@dataclass(frozen=True)
class BackendDefaults:
    """Values a backend config may leave out."""

    max_concurrency: int = 16
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 20.0


def build_backend(
    name: str, config: OpenAIBackendConfig | TransformersBackendConfig, defaults: BackendDefaults
) -> JudgeBackend:
    if isinstance(config, OpenAIBackendConfig):
        return OpenAIChatBackend(
            name, config.base_url, config.model, config.resolved_key(),
            max_concurrency=config.max_concurrency or defaults.max_concurrency,
            timeout_s=config.timeout_s or defaults.timeout_s,
            max_retries=defaults.max_retries if config.max_retries is None else config.max_retries,
            backoff_s=defaults.backoff_s, backoff_max_s=defaults.backoff_max_s, json_mode=config.json_mode,
            requests_per_minute=config.requests_per_minute, tokens_per_minute=config.tokens_per_minute,
            burst=config.burst,
        )
    return TransformersBackend(
        name, config.model_path, device=config.device, dtype=config.dtype,
        max_batch_size=config.max_batch_size, batch_wait_ms=config.batch_wait_ms,
    )


@dataclass
class Completion:
    text: str
    source: Source  # "call", "cache" or "joined" (shared an in-flight call)


class JudgeRegistry:
    def __init__(self, backends: Mapping[str, JudgeBackend], default: str | None = None, cache_size: int = 10_000):
        self.backends = dict(backends)
        self.default = default if default is not None else next(iter(self.backends), None)
        if self.default is not None and self.default not in self.backends:
            raise ValueError(f"default judge backend {self.default!r} is not among {sorted(self.backends)}")
        self.cache = CompletionCache(cache_size)

    @property
    def ready(self) -> bool:
        return all(b.ready for b in self.backends.values())

    @property
    def not_ready_reason(self) -> str:
        """Always "": a backend that failed to load is ready, and says so on each call (``unavailable``)."""
        return ""

    async def start(self) -> None:
        for backend in self.backends.values():
            await backend.start()

    async def aclose(self) -> None:
        await asyncio.gather(*(b.aclose() for b in self.backends.values()), return_exceptions=True)

    def get(self, name: str | None = None) -> JudgeBackend:
        wanted = name or self.default
        if wanted is None:
            raise VerifierUnavailable(
                "no judge backend is configured: set REWARD_SERVICE_JUDGE_BASE_URL and REWARD_SERVICE_JUDGE_MODEL, "
                "or judge_backends / judge_local_model"
            )
        try:
            return self.backends[wanted]
        except KeyError:
            raise VerifierUnavailable(
                f"judge backend {wanted!r} is not configured on this server; configured: "
                f"{', '.join(sorted(self.backends)) or 'none'}"
            ) from None

    def limiter_stats(self) -> dict[str, LimiterStats]:
        """The gate of each backend that has one (HTTP backends; a local model has no rate to respect)."""
        return {name: backend.limiter_stats() for name, backend in self.backends.items()
                if isinstance(backend, OpenAIChatBackend)}

    async def complete(self, messages: Messages, sampling: Sampling, backend: str | None = None) -> Completion:
        judge = self.get(backend)
        key = cache_key(judge.name, judge.model, messages, sampling.as_key())
        text, source = await self.cache.get_or_call(key, lambda: judge.complete(messages, sampling))
        return Completion(text, source)


JUDGES: ResourceKey[JudgeRegistry] = ResourceKey("judges")
