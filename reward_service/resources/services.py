"""The app's long-lived state: what the lifespan creates and every request reaches through ``deps.ServicesDep``."""
from __future__ import annotations

from dataclasses import dataclass

from reward_service.admission import Admission
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
