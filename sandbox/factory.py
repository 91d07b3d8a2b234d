"""Build a backend from a plain mapping (what settings files and the CLI hold), without importing the server."""
from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from sandbox.api import Backend, Limits, RunRequest, RunResult, RunStatus, one_run_per_case

BACKENDS = ("bwrap", "docker", "none")


class UnavailableBackend:
    """Stands in when the configured backend cannot work here: every run is a named ``sandbox_error``."""

    name = "unavailable"
    ready = True

    def __init__(self, reason: str, languages: dict[str, bool] | None = None) -> None:
        self.reason = reason
        self._languages = languages or {}

    async def run(self, request: RunRequest) -> RunResult:
        return RunResult(RunStatus.SANDBOX_ERROR, reason=self.reason)

    async def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        return [await self.run(r) for r in requests]

    async def run_cases(self, request: RunRequest, stdins: list[str]) -> list[RunResult]:
        return await self.run_many(one_run_per_case(request, stdins))

    def languages(self) -> dict[str, bool]:
        return dict(self._languages)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


def _limits(value: Any, fallback: Limits | None) -> Limits | None:
    if value is None or isinstance(value, Limits):
        return value or fallback
    return Limits(**dict(value))


def build_backend(config: Mapping[str, Any]) -> Backend:
    """``{"backend": "bwrap"|"docker"|"none", "caps": {...}, "defaults": {...}, "warm_pool": 4, ...}``.

    A backend that cannot run on this host (no bwrap binary, no Docker engine) becomes an ``UnavailableBackend``
    so the rest of the service keeps working and every sandbox run says why it could not happen.
    """
    cfg = dict(config)
    kind = cfg.pop("backend", "bwrap")
    caps = _limits(cfg.pop("caps", None), None)
    defaults = _limits(cfg.pop("defaults", None), None)
    # a limits config that names none keeps the backend config's own
    given = {name: value for name, value in (("caps", caps), ("defaults", defaults)) if value is not None}
    if kind == "none":
        return UnavailableBackend("the sandbox is disabled on this server (sandbox_backend=none)")
    if kind == "bwrap":
        from sandbox.bwrap import BwrapBackend, BwrapConfig

        binary = cfg.get("bwrap", "bwrap")
        if shutil.which(binary) is None:
            return UnavailableBackend(f"bubblewrap ({binary}) is not installed; run scripts/setup.sh")
        keep = {k: v for k, v in cfg.items() if k in BwrapConfig.__dataclass_fields__}
        return BwrapBackend(BwrapConfig(**{**keep, **given}))
    if kind == "docker":
        from sandbox.docker_backend import DockerBackend, DockerConfig, docker_unavailable_reason

        reason = docker_unavailable_reason()
        if reason:
            return UnavailableBackend(f"docker backend unavailable: {reason}")
        keep = {k: v for k, v in cfg.items() if k in DockerConfig.__dataclass_fields__}
        return DockerBackend(DockerConfig(**{**keep, **given}))
    raise ValueError(f"unknown sandbox backend {kind!r}; choose one of {', '.join(BACKENDS)}")
