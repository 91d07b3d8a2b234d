"""OpenEnv's WebSocket (``WS /envs/{name}/ws``): messages ``{"type": "reset"|"step"|"state"|"close"|"mcp",
"data": ...}``, answers ``{"type": "observation"|"state"|"mcp"|"error", "data": ...}``, errors with OpenEnv's codes
(INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR, EXECUTION_ERROR, CAPACITY_REACHED, FACTORY_ERROR, SESSION_ERROR) and
ours (``data.error``: session_lost, capacity, infra_error, invalid_request).

Unlike upstream, a socket holds a reference to a session, not the session: a dropped socket leaves it to its TTL, and
a new socket re-attaches by id, either as ``/envs/{name}/ws?session_id=<id>`` or, for a stock client that only
appends ``/ws`` to its base URL, as ``/envs/{name}/sessions/<id>/ws``. A ``close`` message ends the session; a
``reset`` on a socket that holds one ends it and starts another (a sandbox never serves two episodes).
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from environments.errors import EnvError, InvalidRequest
from environments.sessions import Session, SessionManager
from environments.wire.mcp import dispatch

MAX_MESSAGE = 8 << 20


def _error(message: str, code: str, error: EnvError | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"message": message, "code": code}
    if error is not None:
        data.update(error=error.code, **error.details)
    return {"type": "error", "data": data}


def add_routes(router: APIRouter, get_manager: Callable[..., Awaitable[SessionManager]]) -> None:
    async def serve(websocket: WebSocket, name: str, session_id: str | None) -> None:
        manager = await get_manager(websocket)
        await websocket.accept()
        session: Session | None = None
        try:
            manager.env_class(name)
            if session_id is not None:
                session = manager.get(name, session_id)
                session.attached += 1
        except EnvError as exc:
            await websocket.send_json(_error(exc.message, exc.ws_code, exc))
            await websocket.close()
            return
        try:
            while True:
                raw = await websocket.receive_text()
                if len(raw) > MAX_MESSAGE:
                    await websocket.send_json(_error("message too large", "VALIDATION_ERROR"))
                    continue
                try:
                    message = json.loads(raw)
                except (ValueError, RecursionError) as exc:
                    await websocket.send_json(_error(f"Invalid JSON: {exc}", "INVALID_JSON"))
                    continue
                if not isinstance(message, dict):
                    await websocket.send_json(_error("a message is a JSON object", "VALIDATION_ERROR"))
                    continue
                kind = message.get("type", "")
                try:
                    answer, session, closing = await _handle(manager, name, session, kind, message, websocket)
                except EnvError as exc:
                    answer, closing = _error(exc.message, exc.ws_code, exc), False
                await websocket.send_json(answer)
                if closing:
                    break
        except WebSocketDisconnect:
            pass  # the session stays: a new socket re-attaches by id, or the TTL reaps it
        finally:
            if session is not None:
                session.attached -= 1
        try:
            await websocket.close()
        except RuntimeError:
            pass

    async def _handle(manager: SessionManager, name: str, session: Session | None, kind: Any,
                      message: dict[str, Any], websocket: WebSocket) -> tuple[dict[str, Any], Session | None, bool]:
        data = message.get("data")
        if kind == "reset":
            body = data if isinstance(data, dict) else {}
            if session is not None and session.id in manager.sessions:
                session.attached -= 1
                await manager.finish(session, score=False)
            session = None
            session, first = await manager.create(name, body, client_of_socket(websocket))
            session.attached += 1
            answer = {"type": "observation", "data": {"observation": first, "reward": None, "done": False}}
            return answer, session, False
        if kind == "step":
            if session is None:
                raise InvalidRequest("no session on this socket: send reset first, or connect with a session_id",
                                     field="session_id")
            timeout_s = manager.step_timeout(message.get("timeout_s"))
            obs, reward, done = await manager.step(session, data, timeout_s)
            return {"type": "observation", "data": {"observation": obs, "reward": reward, "done": done}}, session, False
        if kind == "state":
            if session is None:
                return {"type": "state", "data": {"episode_id": None, "step_count": 0}}, session, False
            return {"type": "state", "data": manager.state(manager.get(name, session.id))}, session, False
        if kind == "close":
            if session is not None and session.id in manager.sessions:
                score = isinstance(data, dict) and data.get("score") is True
                result = await manager.finish(session, score=score)
                session.attached -= 1
                return {"type": "closed", "data": result}, None, True
            return {"type": "closed", "data": {"closed": True}}, session, True
        if kind == "mcp":
            reply = await dispatch(manager, name, data, session, client_of_socket(websocket))
            return {"type": "mcp", "data": reply}, session, False
        return _error(f"Unknown message type: {kind}", "UNKNOWN_TYPE"), session, False

    def client_of_socket(websocket: WebSocket) -> str:
        return websocket.client.host if websocket.client else ""

    @router.websocket("/envs/{name}/ws")
    async def socket(websocket: WebSocket, name: str, session_id: str | None = None) -> None:
        await serve(websocket, name, session_id)

    @router.websocket("/envs/{name}/sessions/{session_id}/ws")
    async def reattach(websocket: WebSocket, name: str, session_id: str) -> None:
        await serve(websocket, name, session_id)
