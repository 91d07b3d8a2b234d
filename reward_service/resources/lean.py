"""The ``lean`` resource: a client of the configured Kimina Lean server, opened with the service and closed with it.
Without ``lean_server_url`` there is no resource, and every ``lean`` item is ``unavailable``, naming the setting."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reward_service.settings import Settings
from verifiers.context import ResourceKey
from verifiers.kinds.lean.client import LEAN, LeanClient

log = logging.getLogger(__name__)


@asynccontextmanager
async def open_lean(settings: Settings) -> AsyncIterator[dict[ResourceKey[Any], Any]]:
    lean = settings.lean
    if not lean.server_url:
        yield {}
        return
    client = LeanClient(
        lean.server_url, lean.api_key.get_secret_value() if lean.api_key else None, timeout_s=lean.timeout_s,
        http_timeout_s=lean.http_timeout_s, max_batch=lean.max_batch, batch_wait_ms=lean.batch_wait_ms,
        max_concurrency=lean.max_concurrency, max_retries=lean.max_retries, api=lean.api)
    log.info("lean server: %r", client)
    try:
        yield {LEAN: client}
    finally:
        await client.aclose()
