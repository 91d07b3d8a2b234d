"""OpenEnv's HTTP routes, mounted once per environment at ``/envs/{name}`` (so a stock client given
``http://host/envs/python`` as its base URL works unchanged), as a superset: ``reset`` returns the session's id as an
observation field and ``step``/``state``/``close`` take it; a step without one behaves as upstream (a fresh
environment for that request alone). ``build_router`` is framework glue only: sessions live in ``SessionManager``.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request, WebSocket
from fastapi.responses import JSONResponse, Response

from environments.base import FINAL_ANSWER_TOOL
from environments.errors import EnvError, InvalidRequest
from environments.sessions import SessionManager
from environments.wire import mcp, ws

PROTOCOL_VERSION = "1.0.0"  # the OpenEnv HTTP profile these routes speak (openenv-http/1.x)
MAX_BODY = 8 << 20

ManagerDep = Callable[..., Awaitable[SessionManager]]


def error_response(exc: EnvError) -> JSONResponse:
    headers = {"Retry-After": str(exc.details["retry_after_s"])} if "retry_after_s" in exc.details else None
    return JSONResponse({"error": exc.body(), "detail": exc.message, "code": exc.code},
                        status_code=exc.http_status, headers=headers)


async def json_body(request: Request, allow_empty: bool = True) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        if allow_empty:
            return {}
        raise InvalidRequest("the request needs a JSON body", field="body")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest(f"the body is not valid JSON: {exc}", field="body") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object", field="body")
    return body


def client_of(request: Request | WebSocket) -> str:
    """Who holds a session, for the per-client maximum and creation's turns: the peer's address (uvicorn rewrites
    it from X-Forwarded-For for trusted proxies), never a header of the client's choosing."""
    return request.client.host if request.client else ""


def session_param(value: Any, field: str = "session_id") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= 128:
        raise InvalidRequest("session_id must be a string of at most 128 characters", field=field)
    return value


def schema_of(manager: SessionManager, name: str) -> dict[str, Any]:
    cls = manager.env_class(name)
    return {"action": cls.action_model.model_json_schema(),
            "observation": cls.observation_model.model_json_schema(),
            "state": {"type": "object", "properties": {
                "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer"},
                "session_id": {"type": "string"}, "done": {"type": "boolean"}}},
            "final_answer_action": {"type": "object", "properties": {"final_answer": {"type": "string"}},
                                    "required": ["final_answer"], "additionalProperties": False},
            "reset": cls.task_model.model_json_schema(),
            "tools": [{"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                      for t in (*cls.tools, FINAL_ANSWER_TOOL)]}


def openapi_of(name: str) -> dict[str, Any]:
    """The environment's own OpenAPI document, with paths relative to its mount (what ``openenv validate --url``
    reads to find the simulation routes)."""
    post = {"post": {"responses": {"200": {"description": "ok"}}}}
    get = {"get": {"responses": {"200": {"description": "ok"}}}}
    return {"openapi": "3.1.0", "info": {"title": f"reward-service environment {name}", "version": PROTOCOL_VERSION},
            "paths": {"/reset": post, "/step": post, "/state": get, "/close": post, "/schema": get,
                      "/metadata": get, "/health": get, "/mcp": post}}


def build_router(get_manager: ManagerDep) -> APIRouter:
    router = APIRouter(tags=["environments"])
    Manager = Depends(get_manager)

    @router.get("/envs")
    async def list_envs(manager: SessionManager = Manager) -> dict[str, Any]:
        return {"instance": manager.settings.instance,
                "environments": [{"name": name, "description": cls.description,
                                  "tools": [t.name for t in cls.all_tools()], "base_url": f"/envs/{name}"}
                                 for name, cls in sorted(manager.environments.items())],
                "sessions": manager.summary()}

    @router.post("/envs/{name}/reset")
    async def reset(name: str, request: Request, manager: SessionManager = Manager) -> Response:
        try:
            body = await json_body(request)
            _, first = await manager.create(name, body, client_of(request))
        except EnvError as exc:
            return error_response(exc)
        return JSONResponse({"observation": first, "reward": None, "done": False})

    @router.post("/envs/{name}/step")
    async def step(name: str, request: Request, manager: SessionManager = Manager) -> Response:
        try:
            body = await json_body(request, allow_empty=False)
            unknown = set(body) - {"action", "session_id", "timeout_s", "request_id"}
            if unknown:
                raise InvalidRequest(f"unknown step fields: {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
            if "action" not in body:
                raise InvalidRequest("step needs an action", field="action")
            timeout_s = manager.step_timeout(body.get("timeout_s"))
            sid = session_param(body.get("session_id"))
            if sid is None:  # upstream's stateless step: a fresh environment for this request alone
                session, _ = await manager.create(name, {}, client_of(request))
                try:
                    obs, reward, done = await manager.step(session, body["action"], timeout_s)
                finally:
                    if session.id in manager.sessions:
                        await manager.finish(session, score=False)
                obs.pop("session_id", None)
            else:
                obs, reward, done = await manager.step(manager.get(name, sid), body["action"], timeout_s)
        except EnvError as exc:
            return error_response(exc)
        return JSONResponse({"observation": obs, "reward": reward, "done": done})

    @router.get("/envs/{name}/state")
    async def state(name: str, session_id: str | None = None, manager: SessionManager = Manager) -> Response:
        try:
            manager.env_class(name)
            sid = session_param(session_id)
            if sid is None:  # upstream: the state of a fresh environment
                return JSONResponse({"episode_id": None, "step_count": 0})
            return JSONResponse(manager.state(manager.get(name, sid)))
        except EnvError as exc:
            return error_response(exc)

    @router.post("/envs/{name}/close")
    async def close(name: str, request: Request, manager: SessionManager = Manager) -> Response:
        try:
            body = await json_body(request, allow_empty=False)
            sid = session_param(body.get("session_id"))
            if sid is None:
                raise InvalidRequest("close needs a session_id", field="session_id")
            score = body.get("score", False)
            if not isinstance(score, bool):
                raise InvalidRequest("score must be true or false", field="score")
            return JSONResponse(await manager.finish(manager.get(name, sid), score))
        except EnvError as exc:
            return error_response(exc)

    @router.get("/envs/{name}/schema")
    async def schema(name: str, manager: SessionManager = Manager) -> Response:
        try:
            return JSONResponse(schema_of(manager, name))
        except EnvError as exc:
            return error_response(exc)

    @router.get("/envs/{name}/metadata")
    async def metadata(name: str, manager: SessionManager = Manager) -> Response:
        try:
            cls = manager.env_class(name)
        except EnvError as exc:
            return error_response(exc)
        return JSONResponse({"name": name, "description": cls.description, "version": PROTOCOL_VERSION,
                             "readme_content": None, "author": "reward-service",
                             "documentation_url": "docs/environments.md"})

    @router.get("/envs/{name}/health")
    async def health(name: str, manager: SessionManager = Manager) -> Response:
        try:
            manager.env_class(name)
        except EnvError as exc:
            return error_response(exc)
        return JSONResponse({"status": "healthy"})

    @router.get("/envs/{name}/openapi.json", include_in_schema=False)
    async def openapi(name: str, manager: SessionManager = Manager) -> Response:
        try:
            manager.env_class(name)
        except EnvError as exc:
            return error_response(exc)
        return JSONResponse(openapi_of(name))

    mcp.add_routes(router, get_manager)
    ws.add_routes(router, get_manager)
    return router
