"""Liveness, readiness, metrics and the verifier catalogue."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from reward_service.deps import ServicesDep
from reward_service.errors import ApiError
from verifiers.context import SANDBOX
from verifiers.kinds.judges.registry import JUDGES

router = APIRouter()


@router.get("/healthz", tags=["ops"])
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", tags=["ops"])
async def readyz(services: ServicesDep) -> JSONResponse:
    runtime = services.runtime
    if runtime is None or services.admission.draining:
        return JSONResponse({"ready": False, "waiting_for": ["startup"]}, status_code=503)
    waiting = runtime.not_ready()
    body: dict[str, Any] = {"ready": not waiting, "waiting_for": waiting}
    sandbox = runtime.resources.get(SANDBOX)
    isolation = sandbox.isolation() if sandbox is not None else None
    if isolation is not None:
        body["sandbox"] = isolation  # which mechanism enforces which limit on this host
    return JSONResponse(body, status_code=200 if not waiting else 503)


@router.get("/metrics", tags=["ops"])
async def metrics(services: ServicesDep) -> Response:
    if services.runtime is not None:
        stats = services.runtime.pool.stats
        services.metrics.workers_busy.set(stats.busy)
        services.metrics.worker_restarts.set(stats.restarts)
        judges = services.runtime.resources.get(JUDGES)
        services.metrics.judge_limits.source = judges.limiter_stats if judges is not None else None
    services.metrics.queue_depth.set(services.admission.pending)
    return Response(services.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/v1/verifiers", tags=["verify"])
async def list_verifiers(services: ServicesDep) -> dict[str, Any]:
    runtime = services.runtime
    if runtime is None:  # the lifespan opens the runtime before the server accepts connections
        raise ApiError(503, "server is starting", headers={"Retry-After": str(services.settings.limits.retry_after_s)})
    return {"verifiers": [v.describe() for v in sorted(runtime.registry, key=lambda v: v.name)]}
