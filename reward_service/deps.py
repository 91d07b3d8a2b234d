"""The app's long-lived state (``Services``) and the FastAPI dependencies through which a route reaches it: services,
settings and admission control.

Routes declare what they need as parameters (``services: ServicesDep``, ``settings: SettingsDep``,
``gate: AdmissionDep``) instead of reading ``request.app.state`` by hand; a test can swap any of them through
``app.dependency_overrides``. None of these raise: readiness and admission are checked where the route calls
``gate.ready()`` / ``gate.admit(n)``, after the body has been validated. They are ``async def`` although they never
await: FastAPI runs a plain ``def`` dependency in a worker thread, a hop per request for a dictionary look-up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from reward_service.admission import Admission, AdmissionGate
from reward_service.metrics import Metrics
from reward_service.resources.runtime import Runtime
from reward_service.settings import Settings


@dataclass
class Services:
    """Per-app state, created by ``create_app`` and stored on ``app.state.services``; ``runtime`` is set while the
    lifespan runs (None before start-up finished and after shutdown began)."""

    settings: Settings
    metrics: Metrics
    admission: Admission
    runtime: Runtime | None = None


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
