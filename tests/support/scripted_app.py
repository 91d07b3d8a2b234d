"""A small scripted server for client tests: it answers /v1/verify with the failures a test queued first (429/503
with Retry-After, 4xx, 413 for batches over a size), then with real exact-match verdicts, and records every call;
its environment steps answer the same queue (a typed ``code`` with each failure), for the failures a real session
cannot be made to show on demand (``infra_error``, a 429 on a step).

Run it for real (uvicorn on loopback) so the client's retries go through sockets, not a mock transport.
"""
from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

app = FastAPI()
STATE: dict[str, Any] = {"script": [], "calls": [], "max_items": None}


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/script")
async def script(request: Request) -> dict[str, int]:
    """Queue answers: [{"status": 429, "retry_after": "1", "detail": "..."}]; reset the call log."""
    body = await request.json()
    STATE["script"] = list(body.get("answers", []))
    STATE["max_items"] = body.get("max_items")
    STATE["calls"] = []
    return {"queued": len(STATE["script"])}


@app.get("/calls")
async def calls() -> list[dict[str, Any]]:
    return STATE["calls"]


@app.post("/v1/verify")
async def verify(request: Request) -> JSONResponse:
    body = await request.json()
    items = body["items"]
    STATE["calls"].append({"t": time.monotonic(), "n": len(items), "auth": request.headers.get("authorization"),
                           "ids": [i.get("id") for i in items]})
    if STATE["script"]:
        answer = STATE["script"].pop(0)
        headers = {"Retry-After": answer["retry_after"]} if answer.get("retry_after") else None
        content = {"detail": answer.get("detail", "scripted failure")}
        if answer.get("loc") is not None:
            content["loc"] = answer["loc"]
        return JSONResponse(content, status_code=answer["status"], headers=headers)
    if STATE["max_items"] and len(items) > STATE["max_items"]:
        return JSONResponse({"detail": f"batch of {len(items)} items exceeds the limit", "loc": ["items"]},
                            status_code=413)
    results = []
    for item in items:
        same = str(item["response"]).strip().lower() == str(item.get("reference")).strip().lower()
        results.append({"id": item.get("id"), "verifier": item["verifier"], "score": 1.0 if same else 0.0,
                        "status": "ok", "reason": "compared", "details": {}, "elapsed_ms": 0.0})
    return JSONResponse({"results": results})



@app.post("/envs/{env}/reset")
async def env_reset(env: str) -> JSONResponse:
    """A session of nothing: its steps answer with the queued failures (``/script``), then an empty observation."""
    return JSONResponse({"observation": {"session_id": f"s-{len(STATE['calls'])}"}, "reward": None, "done": False})


@app.post("/envs/{env}/step")
async def env_step(env: str, request: Request) -> JSONResponse:
    body = await request.json()
    STATE["calls"].append({"t": time.monotonic(), "n": 1, "auth": None, "ids": [body.get("session_id")]})
    if STATE["script"]:
        answer = STATE["script"].pop(0)
        headers = {"Retry-After": answer["retry_after"]} if answer.get("retry_after") else None
        content = {"code": answer.get("code", ""), "detail": answer.get("detail", "scripted failure")}
        return JSONResponse(content, status_code=answer["status"], headers=headers)
    return JSONResponse({"observation": {"status": "ok"}, "reward": None, "done": False})
