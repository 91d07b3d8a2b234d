"""A bare FastAPI app with the same request shape as /v1/verify: the baseline for HTTP overhead."""
from typing import Any

from fastapi import FastAPI

app = FastAPI()


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/echo")
async def echo(body: dict[str, Any]) -> dict[str, Any]:
    return {"results": [{"id": i.get("id"), "score": 1.0} for i in body["items"]]}
