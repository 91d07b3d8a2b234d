"""Resource factory for the configured reward models (``models``); loads them in the background at start-up."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reward_service.settings import Settings
from verifiers.context import ResourceKey
from verifiers.kinds.reward_models.hub import MODELS


@asynccontextmanager
async def open_reward_models(settings: Settings) -> AsyncIterator[dict[ResourceKey[Any], Any]]:
    """Yields ``{MODELS: ModelHub}`` at once; the hub's ``ready`` gates /readyz until every model is warm.
    With no model configured it yields nothing, so torch is never imported."""
    if not settings.models.specs:
        yield {}
        return
    from verifiers.kinds.reward_models.hub import ModelHub

    hub = ModelHub(settings.models.specs)
    hub.start()
    try:
        yield {MODELS: hub}
    finally:
        await hub.close()
