"""MCP at ``POST /envs/{name}/mcp``: JSON-RPC 2.0 as MCP's streamable HTTP transport carries it (answers as JSON,
the session in the ``Mcp-Session-Id`` header; ``initialize``, ``notifications/initialized``, ``ping``,
``tools/list``, ``tools/call``; ``DELETE`` ends the session), plus OpenEnv's ``openenv/session/create`` and
``openenv/session/close`` and its ``params.session_id``.

The MCP session is an environment session: ``initialize`` opens one (or, with ``?session_id=<id>`` on the URL,
attaches to one a ``reset`` opened with its task and reward spec), and every tool call steps it. A tool's result is
the step's text as MCP content, with the observation, reward and done as ``structuredContent``; a failed step of
the policy's (an exception in its code) is a result with ``isError``, while a lost session or an infra failure is a
JSON-RPC error carrying our typed code, never a result a trainer could score.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from environments.base import FINAL_ANSWER
from environments.errors import EnvError, InvalidRequest
from environments.sessions import Session, SessionManager

LATEST = "2025-06-18"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, SERVER_ERROR = -32700, -32600, -32601, -32602, -32000


def _error(request_id: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _ok(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _env_error(request_id: Any, exc: EnvError) -> dict[str, Any]:
    code = INVALID_PARAMS if isinstance(exc, InvalidRequest) else SERVER_ERROR
    return _error(request_id, code, exc.message, exc.body())


def tools_of(manager: SessionManager, name: str) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in manager.env_class(name).all_tools()]


async def _call(manager: SessionManager, name: str, session: Session, params: dict[str, Any]) -> dict[str, Any]:
    tool = params.get("name")
    arguments = params.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise InvalidRequest("tools/call arguments must be an object", field="params.arguments")
    names = {t.name for t in session.env.all_tools()}
    if tool not in names:
        raise InvalidRequest(f"unknown tool {tool!r}; this environment has: {', '.join(sorted(names))}",
                             field="params.name")
    if tool == FINAL_ANSWER:
        answer = arguments.get("answer")
        action: dict[str, Any] = {FINAL_ANSWER: answer if isinstance(answer, str) else json.dumps(answer)}
    else:
        action = session.env.action_of(str(tool), arguments)
    timeout_s = manager.step_timeout(params.get("timeout_s"))
    obs, reward, done = await manager.step(session, action, timeout_s)
    text = session.transcript.messages[-1].get("content") if tool != FINAL_ANSWER else None
    if not isinstance(text, str):
        text = json.dumps({"reward": reward, "done": done, **({"verdict": obs["verdict"]} if "verdict" in obs else {})})
    failed = obs.get("status") not in ("ok", "final_answer", None)
    return {"content": [{"type": "text", "text": text}], "structuredContent": {
        "observation": obs, "reward": reward, "done": done}, "isError": failed}


async def dispatch(manager: SessionManager, name: str, message: Any, session: Session | None, client: str,
                   header_session: str | None = None) -> dict[str, Any] | None:
    """One JSON-RPC message; None for a notification. ``session``: the WebSocket's or the header's session."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return _error(message.get("id") if isinstance(message, dict) else None, INVALID_REQUEST,
                      "not a JSON-RPC 2.0 request")
    request_id = message.get("id")
    method = message["method"]
    params = message.get("params") or {}
    if not isinstance(params, dict):
        return _error(request_id, INVALID_PARAMS, "params must be an object")
    if "id" not in message:
        return None  # a notification (notifications/initialized, cancelled): nothing to answer
    try:
        if method == "initialize":
            version = params.get("protocolVersion")
            return _ok(request_id, {"protocolVersion": version if isinstance(version, str) else LATEST,
                                    "capabilities": {"tools": {"listChanged": False}},
                                    "serverInfo": {"name": f"reward-service/{name}", "version": "1.0.0"}})
        if method == "ping":
            return _ok(request_id, {})
        if method == "tools/list":
            return _ok(request_id, {"tools": tools_of(manager, name)})
        if method == "openenv/session/create":
            created, first = await manager.create(name, params, client)
            return _ok(request_id, {"session_id": created.id, "observation": first})
        if method == "openenv/session/close":
            sid = params.get("session_id")
            if not isinstance(sid, str):
                raise InvalidRequest("'session_id' is required", field="params.session_id")
            return _ok(request_id, await manager.finish(manager.get(name, sid), score=params.get("score") is True))
        if method == "tools/call":
            sid = params.get("session_id") or header_session
            target = manager.get(name, sid) if isinstance(sid, str) else session
            if target is None:  # upstream's stateless call: a fresh environment for this call alone
                target, _ = await manager.create(name, {}, client)
                try:
                    return _ok(request_id, await _call(manager, name, target, params))
                finally:
                    if target.id in manager.sessions:
                        await manager.finish(target, score=False)
            return _ok(request_id, await _call(manager, name, target, params))
        return _error(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
    except EnvError as exc:
        return _env_error(request_id, exc)


def add_routes(router: APIRouter, get_manager: Callable[..., Awaitable[SessionManager]]) -> None:
    @router.post("/envs/{name}/mcp")
    async def mcp_post(name: str, request: Request, session_id: str | None = None) -> Response:
        manager = await get_manager(request)
        try:
            message = json.loads(await request.body())
        except (ValueError, RecursionError):
            return JSONResponse(_error(None, PARSE_ERROR, "Parse error"))
        client = request.client.host if request.client else ""
        header = request.headers.get("mcp-session-id")
        try:
            manager.env_class(name)
            bound: Session | None = None
            if header:
                bound = manager.get(name, header)
            if isinstance(message, dict) and message.get("method") == "initialize":
                bound = manager.get(name, session_id) if session_id else (await manager.create(name, {}, client))[0]
                reply = await dispatch(manager, name, message, bound, client)
                return JSONResponse(reply, headers={"Mcp-Session-Id": bound.id})
        except EnvError as exc:
            request_id = message.get("id") if isinstance(message, dict) else None
            status = exc.http_status if header and exc.code == "session_lost" else 200
            return JSONResponse(_env_error(request_id, exc), status_code=404 if status == 410 else status)
        if isinstance(message, list):  # a batch
            replies = [r for m in message if (r := await dispatch(manager, name, m, bound, client, header))]
            return JSONResponse(replies) if replies else Response(status_code=202)
        reply = await dispatch(manager, name, message, bound, client, header)
        if reply is None:
            return Response(status_code=202)
        return JSONResponse(reply, headers={"Mcp-Session-Id": header} if header else None)

    @router.get("/envs/{name}/mcp")
    async def mcp_get(name: str) -> Response:
        return Response(status_code=405, headers={"Allow": "POST, DELETE"})  # no server-initiated stream

    @router.delete("/envs/{name}/mcp")
    async def mcp_delete(name: str, request: Request) -> Response:
        manager = await get_manager(request)
        header = request.headers.get("mcp-session-id")
        if header and header in manager.sessions:
            await manager.finish(manager.sessions[header], score=False)
        return Response(status_code=200)
