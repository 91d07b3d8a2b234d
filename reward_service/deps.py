"""The app's long-lived state (``Services``) and the FastAPI dependencies through which a route reaches it: services,
settings and admission control.

Routes declare what they need as parameters (``services: ServicesDep``, ``settings: SettingsDep``,
``gate: AdmissionDep``) instead of reading ``request.app.state`` by hand; a test can swap any of them through
``app.dependency_overrides``. None of these raise: readiness and admission are checked where the route calls
``gate.ready()`` / ``gate.admit(n)``, after the body has been validated. They are ``async def`` although they never
await: FastAPI runs a plain ``def`` dependency in a worker thread, a hop per request for a dictionary look-up.

``ScopeDep`` is the request's cancellation scope: cancelled when the client disconnects (its queued items are
dropped, its running checks and programs killed) or when a shutdown's drain runs out (``Services.drain``).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

from reward_service.admission import Admission, AdmissionGate
from reward_service.metrics import Metrics
from reward_service.resources.runtime import Runtime
from reward_service.settings import Settings
from verifiers.engine.cancel import CancelScope

if TYPE_CHECKING:
    from reward_service.jobs.manager import JobManager

log = logging.getLogger(__name__)

DISCONNECTED = "the client disconnected before its answer was ready"
SHUTTING_DOWN = "the server is shutting down and its drain time (shutdown_grace_s) ran out"


@dataclass
class Services:
    """Per-app state, created by ``create_app`` and stored on ``app.state.services``; ``runtime`` is set while the
    lifespan runs (None before start-up finished and after shutdown began)."""

    settings: Settings
    metrics: Metrics
    admission: Admission
    runtime: Runtime | None = None
    jobs: JobManager | None = None  # set while the lifespan runs, as ``runtime``
    in_flight: set[CancelScope] = field(default_factory=set)  # the scopes of the requests now running
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # set while ``in_flight`` is empty

    def started(self, scope: CancelScope) -> None:
        self.in_flight.add(scope)
        self.idle.clear()

    def ended(self, scope: CancelScope) -> None:
        self.in_flight.discard(scope)
        if not self.in_flight:
            self.idle.set()

    async def drain(self, grace_s: float) -> int:
        """Shutdown's first step: refuse new work (503), give the work in flight up to ``grace_s`` seconds to end,
        then cancel what is left (each unfinished item answered ``cancelled``, its programs killed) and wait for
        those answers to go out. Returns how many requests were cancelled."""
        self.admission.draining = True
        if self.in_flight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.idle.wait(), grace_s)
        left = list(self.in_flight)
        if left:
            log.warning("shutdown: cancelling %d request(s) still running after %gs", len(left), grace_s)
        for scope in left:
            scope.cancel(SHUTTING_DOWN)
        if self.jobs is not None:
            self.jobs.let_readers_go()
        if self.in_flight:  # cancelled work answers at once; this bounds a stuck one
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.idle.wait(), 10.0)
        return len(left)


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_settings(services: ServicesDep) -> Settings:
    return services.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


async def get_admission(services: ServicesDep) -> AdmissionGate:
    def refused() -> None:  # the labelled child is created on the first refusal, so /metrics lists it from then on
        services.metrics.rejected.labels("saturated").inc()

    return AdmissionGate(services.admission, services.runtime, services.settings.limits.retry_after_s, refused)


AdmissionDep = Annotated[AdmissionGate, Depends(get_admission)]


async def _cancel_on_disconnect(request: Request, scope: CancelScope) -> None:
    """Wait for the ASGI ``http.disconnect`` (the body was read before the route ran, so the next message is the
    client going away): a wait on the server's event, no polling."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            scope.cancel(DISCONNECTED)
            return


async def request_scope(request: Request, services: ServicesDep) -> AsyncIterator[CancelScope]:
    scope = CancelScope()
    watcher = asyncio.ensure_future(_cancel_on_disconnect(request, scope))
    services.started(scope)
    try:
        yield scope
    finally:
        services.ended(scope)
        watcher.cancel()


ScopeDep = Annotated[CancelScope, Depends(request_scope)]
