"""The ``models`` resource: every configured reward model, loaded in the background and scored through a batcher.

The hub reports ``ready = False`` until every model has loaded and warmed up (so /readyz stays 503), and a model
that failed to load keeps it False and answers ``unavailable`` with the load error: a trainer must not get rewards
from a half-configured server. A model served by vLLM/SGLang loads only its tokenizer here and is scored through a
``RemoteScorer`` instead of a batcher; inputs, limits and results are the same either way.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from verifiers.context import ResourceKey
from verifiers.kinds.reward_models.batcher import Batcher
from verifiers.kinds.reward_models.formats import Encoded
from verifiers.kinds.reward_models.spec import ModelSpec
from verifiers.types import VerifierUnavailable

log = logging.getLogger(__name__)


class UnknownModel(KeyError):
    def __init__(self, name: str, known: Sequence[str]):
        super().__init__(name)
        self.name, self.known = name, sorted(known)

    def __str__(self) -> str:
        return f"unknown reward model {self.name!r}; configured: {', '.join(self.known) or 'none'}"


class InputTooLong(ValueError):
    """The encoded input is longer than the model accepts."""


class Scorer(Protocol):
    """The local ``Batcher`` or a ``RemoteScorer``: scores per sequence, or the exception that sequence ended with."""

    async def score(self, seqs: Sequence[Encoded]) -> list[list[float] | BaseException]: ...

    async def close(self) -> None: ...


@dataclass
class _Served:
    spec: ModelSpec
    loaded: Any = None  # LoadedModel (or RemoteModel for a served one) once loaded
    scorer: Scorer | None = None
    error: str | None = None


class ModelHub:
    def __init__(self, specs: Sequence[ModelSpec], loader: Any = None) -> None:
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"reward model names must be unique: {names}")
        self._served = {s.name: _Served(s) for s in specs}
        self._loader = loader
        self._task: asyncio.Task[None] | None = None

    # --- lifetime ------------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return all(s.scorer is not None for s in self._served.values())

    @property
    def not_ready_reason(self) -> str:
        """The models that failed to load, and why ("" while they are still loading)."""
        failed = [f"{n}: {s.error}" for n, s in self._served.items() if s.error]
        return f"reward models failed to load: {'; '.join(failed)}" if failed else ""

    def start(self) -> None:
        """Load every model in a background task; returns at once."""
        self._task = asyncio.get_running_loop().create_task(self._load_all())

    async def wait_ready(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - public hub API (prm-eval, tests)
        """Wait for loading to finish; raises VerifierUnavailable if a model failed to load."""
        if self._task is not None:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        failed = {n: s.error for n, s in self._served.items() if s.error}
        if failed:
            raise VerifierUnavailable(f"reward models failed to load: {failed}")

    async def _load_all(self) -> None:
        if self._loader is None:
            from verifiers.kinds.reward_models.loading import load_model

            self._loader = load_model
        for served in self._served.values():
            spec = served.spec
            try:
                if spec.remote:
                    from verifiers.kinds.reward_models.remote import RemoteScorer, load_remote

                    served.loaded = await asyncio.to_thread(load_remote, spec)
                    served.scorer = RemoteScorer(spec)
                    continue
                loaded = await asyncio.to_thread(self._loader, spec)
            except Exception as exc:
                served.error = f"{type(exc).__name__}: {str(exc)[:500]}"
                log.exception("reward model %s failed to load", spec.name)
                continue
            served.loaded = loaded
            batcher = Batcher(
                loaded.run, max_batch_tokens=spec.max_batch_tokens, max_batch_size=spec.max_batch_size,
                max_wait_ms=spec.max_wait_ms, on_oom=_free_device_cache, name=spec.name,
            )
            batcher.start()
            served.scorer = batcher

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            try:  # a load in progress holds a thread; let it finish rather than leak a half-built model
                await asyncio.wait_for(asyncio.shield(self._task), 60)
            except Exception:
                pass
        for served in self._served.values():
            if served.scorer is not None:
                await served.scorer.close()

    # --- lookup --------------------------------------------------------------------------------------------
    def names(self, kind: str | None = None) -> list[str]:
        return [n for n, s in self._served.items() if kind is None or s.spec.kind == kind]

    def spec(self, name: str) -> ModelSpec:
        try:
            return self._served[name].spec
        except KeyError:
            raise UnknownModel(name, list(self._served)) from None

    def _get(self, name: str) -> _Served:
        self.spec(name)
        served = self._served[name]
        if served.error:
            raise VerifierUnavailable(f"reward model {name!r} failed to load: {served.error}")
        if served.scorer is None:
            raise VerifierUnavailable(f"reward model {name!r} is still loading")
        return served

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for name, s in self._served.items():
            info: dict[str, Any] = {"name": name, "kind": s.spec.kind, "format": s.spec.format,
                                    "backend": s.spec.backend, "ready": s.scorer is not None, "error": s.error}
            if s.spec.remote:
                info.update(url=s.spec.url, remote_model=s.spec.remote_model or s.spec.path)
            elif s.loaded is not None:
                info.update(device=s.loaded.device, dtype=str(s.loaded.dtype), params=s.loaded.n_params,
                            attn=s.loaded.attn_implementation, max_length=s.loaded.max_length)
            out.append(info)
        return out

    # --- scoring -------------------------------------------------------------------------------------------
    async def _score(self, served: _Served, seqs: list[Encoded]) -> list[list[float] | BaseException]:
        limit = served.loaded.max_length
        results: list[list[float] | BaseException] = [
            InputTooLong(f"input of {len(s)} tokens exceeds the model's limit of {limit}") for s in seqs
        ]
        fit = [i for i, s in enumerate(seqs) if len(s) <= limit]
        if served.scorer is None:
            raise VerifierUnavailable(f"reward model {served.spec.name!r} is not loaded yet")
        scored = await served.scorer.score([seqs[i] for i in fit])
        for i, r in zip(fit, scored):
            results[i] = r
        return results

    async def score_steps(
        self, name: str, items: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | BaseException]:
        """Step scores per (prompt, steps) item, or the exception that item ended with."""
        served = self._get(name)
        if served.spec.kind != "prm":
            raise ValueError(f"reward model {name!r} is an outcome model ({served.spec.format}), not a PRM")
        seqs = await asyncio.to_thread(served.loaded.encoder.encode_steps, list(items))
        return await self._score(served, seqs)

    async def score_responses(
        self, name: str, items: Sequence[tuple[str, str]]
    ) -> list[float | BaseException]:
        """One scalar per (prompt, response) item, or the exception that item ended with."""
        served = self._get(name)
        if served.spec.kind != "orm":
            raise ValueError(f"reward model {name!r} is a process model ({served.spec.format}), not an ORM")
        seqs = await asyncio.to_thread(served.loaded.encoder.encode_responses, list(items))
        return [r if isinstance(r, BaseException) else r[0] for r in await self._score(served, seqs)]


def _free_device_cache() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover - best effort
        pass


MODELS: ResourceKey[ModelHub] = ResourceKey("models")
