"""The docker backend: runs only where a Docker engine answers; elsewhere the skip says why."""
from __future__ import annotations

import asyncio

import pytest

from sandbox.api import Limits, RunRequest, RunStatus
from sandbox.docker_backend import docker_unavailable_reason
from sandbox.factory import UnavailableBackend, build_backend

REASON = docker_unavailable_reason()


def test_without_an_engine_the_factory_names_the_problem() -> None:
    if not REASON:
        pytest.skip("a Docker engine is reachable here")
    backend = build_backend({"backend": "docker"})
    assert isinstance(backend, UnavailableBackend)
    r = asyncio.run(backend.run(RunRequest(code="print(1)")))
    assert r.status is RunStatus.SANDBOX_ERROR and "docker" in r.reason


@pytest.mark.skipif(bool(REASON), reason=f"no Docker engine reachable: {REASON[:120]}")
def test_docker_runs_and_contains() -> None:
    async def go() -> list:
        backend = build_backend({"backend": "docker"})
        try:
            return await backend.run_many([
                RunRequest(code="print(input() * 2)", stdin="ab"),
                RunRequest(code="import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)"),
                RunRequest(code="import time\ntime.sleep(30)", limits=Limits(wall_s=2)),
            ])
        finally:
            await backend.close()

    ok, net, slow = asyncio.run(go())
    assert ok.status is RunStatus.OK and ok.stdout == "abab\n"
    assert net.status is RunStatus.RUNTIME_ERROR
    assert slow.status is RunStatus.TIMEOUT
