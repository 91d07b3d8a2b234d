"""Build a backend from its typed configuration (the service builds it from its ``sandbox`` settings block)."""
from __future__ import annotations

import shutil
from dataclasses import dataclass

from sandbox.api import Backend, RunRequest, RunResult, RunStatus
from sandbox.bwrap import BwrapBackend, BwrapConfig
from sandbox.docker_backend import DockerBackend, DockerConfig, docker_unavailable_reason

BACKENDS = ("bwrap", "docker", "none")


@dataclass(frozen=True)
class DisabledConfig:
    """``sandbox_backend=none``: no sandbox; every run is a sandbox_error saying so."""


BackendConfig = BwrapConfig | DockerConfig | DisabledConfig


class UnavailableBackend(Backend):
    """Stands in when the configured backend cannot work here: every run is a named ``sandbox_error``."""

    name = "unavailable"

    def __init__(self, reason: str, languages: dict[str, bool] | None = None) -> None:
        self._reason = reason
        self._languages = languages or {}

    @property
    def reason(self) -> str:
        return self._reason

    async def run(self, request: RunRequest) -> RunResult:
        return RunResult(RunStatus.SANDBOX_ERROR, reason=self._reason)

    def languages(self) -> dict[str, bool]:
        return dict(self._languages)


def build_backend(config: BackendConfig) -> Backend:
    """The backend ``config`` describes. One that cannot run on this host (no bwrap binary, no Docker engine) becomes
    an ``UnavailableBackend`` so the rest of the service keeps working and every sandbox run says why it could not
    happen."""
    if isinstance(config, DisabledConfig):
        return UnavailableBackend("the sandbox is disabled on this server (sandbox_backend=none)")
    if isinstance(config, BwrapConfig):
        if shutil.which(config.bwrap) is None:
            return UnavailableBackend(f"bubblewrap ({config.bwrap}) is not installed; run scripts/setup.sh")
        return BwrapBackend(config)
    reason = docker_unavailable_reason()
    if reason:
        return UnavailableBackend(f"docker backend unavailable: {reason}")
    return DockerBackend(config)
