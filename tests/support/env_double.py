"""A double of the service's environment routes (``/envs/{name}/reset|step|state|close|schema``), for the client and
trainer-adapter tests while they run apart from the real ``environments`` package: it speaks the same wire contract
(session ids that name the instance, typed error codes: ``session_lost`` 410, ``capacity`` 429 with Retry-After,
``infra_error`` 503) and is run for real (uvicorn on loopback, tests/support/client.py's pattern), so killing it
kills its sessions.

Its python environment keeps one namespace per session and runs the test's own code in it (never a policy's); its
final answer is scored by exact match against the reset's ``reward.reference``. Knobs (environment variables):
``ENV_DOUBLE_CAPACITY`` (sessions at once, then 429), ``ENV_DOUBLE_NAME`` (the instance's name in session ids).
A step whose code is ``"HANG"`` never answers (a hung process); ``"INFRA"``, or any code step of a session reset with
the task field ``infra``, answers 503 ``infra_error``.
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.support.server import ROOT, free_port

app = FastAPI()
NAME = os.environ.get("ENV_DOUBLE_NAME") or uuid.uuid4().hex[:6]
CAPACITY = int(os.environ.get("ENV_DOUBLE_CAPACITY") or 1000)
SESSIONS: dict[str, dict[str, Any]] = {}
LOG: list[dict[str, Any]] = []


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


@app.get("/readyz")
async def readyz() -> dict[str, str]:
    return {"status": "ready", "instance": NAME}


@app.get("/log")
async def log() -> list[dict[str, Any]]:
    return LOG


@app.get("/envs/{env}/schema")
async def schema(env: str) -> dict[str, Any]:
    return {"action": {"type": "object"}, "observation": {"type": "object"}, "tools": []}


@app.post("/envs/{env}/reset")
async def reset(env: str, request: Request) -> JSONResponse:
    body = await request.json()
    if env not in ("python", "sql"):
        return _error(404, "unknown_environment", f"no environment {env!r}")
    if len(SESSIONS) >= CAPACITY:
        return _error(429, "capacity", "no free session slot", {"Retry-After": "1"})
    session_id = f"{NAME}.{uuid.uuid4().hex}"
    SESSIONS[session_id] = {"env": env, "namespace": {}, "reward": body.get("reward"), "done": False,
                            "task": {k: v for k, v in body.items() if k not in ("reward", "seed", "episode_id")}}
    LOG.append({"call": "reset", "session_id": session_id, "body": body})
    observation = {"session_id": session_id, "text": f"Environment {env} ready."}
    return JSONResponse({"observation": observation, "reward": None, "done": False})


def _session(body: dict[str, Any]) -> dict[str, Any] | JSONResponse:
    session_id = str(body.get("session_id") or "")
    if session_id not in SESSIONS:
        return _error(410, "session_lost", f"no session {session_id} on instance {NAME}")
    return SESSIONS[session_id]


def _score(session: dict[str, Any], answer: str | None) -> tuple[float, dict[str, Any]]:
    reference = (session.get("reward") or {}).get("reference")
    if answer is None:
        return 0.0, {"score": 0.0, "status": "no_answer", "reason": "no final answer"}
    score = 1.0 if str(answer).strip() == str(reference).strip() else 0.0
    return score, {"score": score, "status": "ok", "reason": "exact match" if score else "differs"}


@app.post("/envs/{env}/step")
async def step(env: str, request: Request) -> JSONResponse:
    body = await request.json()
    session = _session(body)
    if isinstance(session, JSONResponse):
        return session
    action = body.get("action") or {}
    LOG.append({"call": "step", "session_id": body["session_id"], "action": action})
    if session["done"]:
        return _error(409, "episode_done", "the episode is over")
    if "final_answer" in action:
        session["done"] = True
        reward, verdict = _score(session, action["final_answer"])
        return JSONResponse({"observation": {"verdict": verdict}, "reward": reward, "done": True})
    code = str(action.get("code", action.get("query", "")))
    if code == "HANG":
        await asyncio.sleep(3600)
    if code == "INFRA" or session["task"].get("infra"):
        return _error(503, "infra_error", "the sandbox died")
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(code, session["namespace"])  # the test's own code, in a double
        error = ""
    except Exception as exc:  # the code's own error is an observation, as in the real environment
        error = f"{type(exc).__name__}: {exc}"
    return JSONResponse({"observation": {"stdout": out.getvalue(), "error": error}, "reward": None, "done": False})


@app.get("/envs/{env}/state")
async def state(env: str, session_id: str) -> JSONResponse:
    session = _session({"session_id": session_id})
    if isinstance(session, JSONResponse):
        return session
    names = sorted(k for k in session["namespace"] if not k.startswith("__"))
    return JSONResponse({"session_id": session_id, "done": session["done"], "variables": names})


@app.post("/envs/{env}/close")
async def close(env: str, request: Request) -> JSONResponse:
    body = await request.json()
    session = _session(body)
    if isinstance(session, JSONResponse):
        return session
    LOG.append({"call": "close", "session_id": body["session_id"], "score": bool(body.get("score"))})
    del SESSIONS[body["session_id"]]
    if not body.get("score"):
        return JSONResponse({"observation": {}, "reward": None, "done": True})
    reward, verdict = _score(session, None) if not session["done"] else (None, {})
    return JSONResponse({"observation": {"verdict": verdict}, "reward": reward, "done": True})


@contextlib.contextmanager
def env_double(name: str = "", capacity: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The double on a free loopback port: (base URL, process)."""
    port = free_port()
    env = {**os.environ, "ENV_DOUBLE_NAME": name or f"i{port}"}
    if capacity is not None:
        env["ENV_DOUBLE_CAPACITY"] = str(capacity)
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "tests.support.env_double:app", "--port", str(port), "--log-level",
         "warning"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "env double did not start"
            time.sleep(0.05)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=20)


def calls(url: str) -> list[dict[str, Any]]:
    return httpx.get(f"{url}/log", timeout=10).json()
