"""The ``calibration`` resource: the SQLite calibration store and the appeal/correction policy from settings."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reward_service.settings import Settings
from verifiers.calibration import SQLiteCalibrationStore
from verifiers.calibration.apply import RESOURCE, CalibrationPolicy


def policy_from_settings(settings: Settings) -> CalibrationPolicy:
    return CalibrationPolicy(
        store=SQLiteCalibrationStore(settings.calibration_db),
        default_judge=settings.appeal_judge,
        wide_interval=settings.calibration_wide_interval,
        min_appeals=settings.calibration_min_appeals,
    )


@asynccontextmanager
async def open_calibration(settings: Settings) -> AsyncIterator[dict[str, Any]]:
    policy = policy_from_settings(settings)
    try:
        yield {RESOURCE: policy}
    finally:
        if policy.store is not None:
            policy.store.close()
