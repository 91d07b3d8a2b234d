"""The FastAPI application: lifespan (runtime, metrics), middleware, error handlers and routers."""
from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from importlib.resources import files

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service import __version__
from reward_service.admission import Admission
from reward_service.deps import SHUTTING_DOWN, Services
from reward_service.errors import install_error_handlers
from reward_service.logs import request_id_var
from reward_service.metrics import Metrics
from reward_service.middleware import BodySizeLimit, TokenGate
from reward_service.resources.runtime import Runtime
from reward_service.routes import audit, envs, health, jobs, jupyter, openrlhf, prm, sandbox, sandboxfusion, verify
from reward_service.schemas.item_limits import reject_lone_surrogates
from reward_service.settings import Settings
from sandbox.api import run_client, run_source
from verifiers.context import request_source
from verifiers.types import Verdict

log = logging.getLogger(__name__)

# Every router of the service; a capability adds its own here.
ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    verify.router,
    jobs.router,
    audit.router,
    prm.router,
    openrlhf.router,
    sandbox.router,
    sandboxfusion.router,
    envs.router,
    jupyter.router,
)


def client_key(scope: Scope) -> str:
    """Who sent a request, for the sandbox's turns: the peer's address (uvicorn rewrites it from X-Forwarded-For
    for the proxies named in ``--forwarded-allow-ips``). Not a header of the client's choosing, which would let one
    client take as many turns as names it makes up; nor the connection, since a client's pool opens several."""
    peer = scope.get("client")
    return str(peer[0]) if peer else ""


class RequestContext:
    """Request ids, an access log line and request metrics, as plain ASGI (cheaper than BaseHTTPMiddleware)."""

    def __init__(self, app: ASGIApp, metrics: Metrics, known_paths: set[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.known_paths = known_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        rid = headers.get(b"x-request-id", b"").decode("latin-1")[:64] or uuid.uuid4().hex[:16]
        request_id_var.set(rid)
        request_source.set(rid)  # the worker pool's backlog takes turns between requests
        run_source.set(rid)  # and so do the sandbox's slots and the judges' rate gates, first between clients,
        # then between their requests:
        run_client.set(client_key(scope))  # many parallel requests of one client take one client's turns
        started = time.perf_counter()
        code = 500

        async def send_with_id(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            path = scope.get("path", "")
            route = path if path in self.known_paths else "unmatched"
            self.metrics.requests.labels(route, str(code)).inc()
            self.metrics.request_latency.labels(route).observe(elapsed)
            if route not in ("/healthz", "/readyz", "/metrics"):
                log.info(
                    "%s %s %d", scope.get("method"), path, code,
                    extra={"route": route, "status_code": code, "duration_ms": round(elapsed * 1000, 2)},
                )
            # The id is not reset here: Starlette's last-resort 500 handler runs outside this middleware and must
            # still name it. Each request runs in its own task, so the value never leaks to another request.


def _mount_docs(app: FastAPI) -> None:
    """Swagger UI 5 and ReDoc 2 from the fastapi-offline package, so /docs and /redoc render with no network.

    The service's schema is OpenAPI 3.1 (FastAPI's); Swagger UI before 5 refuses to render it.
    """
    static = files("fastapi_offline") / "static"
    app.mount("/static/docs", StaticFiles(directory=str(static)), name="docs-static")
    title = "reward-service API"
    bust = f"?v={version('fastapi-offline')}"  # a browser holding an older bundle at the same path fetches this one

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=title,
            swagger_js_url=f"/static/docs/swagger-ui-bundle.js{bust}",
            swagger_css_url=f"/static/docs/swagger-ui.css{bust}",
            swagger_favicon_url="/static/docs/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title=title,
            redoc_js_url=f"/static/docs/redoc.standalone.js{bust}",
            redoc_favicon_url="/static/docs/favicon.png",
            with_google_fonts=False,
        )


async def announce_readiness(runtime: Runtime, settings: Settings, poll_s: float = 0.1) -> None:
    """Log "ready" when /readyz says ready, not before: while a reward model or warm sandboxes are still starting,
    the log names what /readyz waits for, then says "ready" once nothing is left (or names what failed)."""
    where = f"{settings.server.host}:{settings.server.port}"
    waiting = runtime.not_ready()
    if waiting:
        log.info("reward-service %s serving on %s; not ready yet, /readyz waits for: %s", __version__, where,
                 ", ".join(waiting))
    told = set(waiting)
    while waiting:
        await asyncio.sleep(poll_s)  # a resource's readiness is a flag, not an event
        waiting = runtime.not_ready()
        for failed in [w for w in waiting if w not in told and ": " in w]:  # a reason: it failed and stays failed
            log.warning("reward-service %s not ready: %s", __version__, failed)
        told.update(waiting)
    log.info("reward-service %s ready on %s", __version__, where)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    metrics = Metrics()
    services = Services(settings=settings, metrics=metrics, admission=Admission(settings.limits.max_pending_items))

    def on_result(verifier: str, verdict: Verdict) -> None:
        metrics.items.labels(verifier, verdict.status.value).inc()
        metrics.item_latency.labels(verifier).observe(verdict.elapsed_ms / 1000.0)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with Runtime.open(settings, on_result=on_result) as runtime:
            manager = jobs.open_manager(settings, runtime.engine)
            await manager.start(runtime.engine)
            services.runtime = runtime
            # What start-up built (modules, the registry, parsers' tables: a quarter of a million objects) lives as
            # long as the process: kept out of the collector's full passes, which a request parsing a large body
            # (BFCL items with their tool specs) otherwise triggers, walking all of it: a quarter of such a
            # request's CPU.
            gc.freeze()
            if runtime.environments is not None:
                runtime.environments.observer = metrics
            services.jobs = manager
            metrics.jobs.source = manager.snapshot
            announcing = asyncio.create_task(announce_readiness(runtime, settings))
            try:
                yield
            finally:
                announcing.cancel()
                services.admission.draining = True
                for scope in list(services.in_flight):  # a server that did not drain first (not ``serve``'s)
                    scope.cancel(SHUTTING_DOWN)
                services.jobs = None
                metrics.jobs.source = None
                await manager.close()
                services.runtime = None
                gc.unfreeze()

    app = FastAPI(
        title="reward-service",
        version=__version__,
        description="Verifiers and reward models for RL trainers of language models.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(reject_lone_surrogates)],
    )
    app.state.services = services
    install_error_handlers(app)
    known: set[str] = set()  # route templates, so metrics labels stay bounded
    for router in ROUTERS:
        app.include_router(router)
        known.update(getattr(r, "path", "") for r in router.routes)
    _mount_docs(app)
    known.update(getattr(r, "path", "") for r in app.routes)
    app.add_middleware(BodySizeLimit, max_bytes=settings.limits.max_body_bytes)  # refuse before reading
    token = settings.auth.token.get_secret_value() if settings.auth.token is not None else None
    app.add_middleware(TokenGate, token=token)  # no token, no body read
    app.add_middleware(RequestContext, metrics=metrics, known_paths=known)  # outermost: every answer has its id
    return app
