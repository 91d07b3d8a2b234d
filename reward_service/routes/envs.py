"""Environments for agent rollouts at /envs/{name}/... (OpenEnv's HTTP, WebSocket and MCP routes, as a superset with
sessions): the wire lives in ``environments.wire``, the sessions in the runtime's ``SessionManager``."""
from __future__ import annotations

from fastapi.requests import HTTPConnection

from environments.errors import InfraError
from environments.sessions import SessionManager
from environments.wire.http import build_router


async def get_manager(connection: HTTPConnection) -> SessionManager:
    """The runtime's session manager; while the service starts or stops, an infra error (503)."""
    runtime = connection.app.state.services.runtime
    manager = runtime.environments if runtime is not None else None
    if manager is None:
        raise InfraError("the service is starting or stopping")
    return manager


router = build_router(get_manager)
