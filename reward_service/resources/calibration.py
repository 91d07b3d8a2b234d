"""The ``calibration`` resource: the SQLite calibration store and the appeal/correction policy from settings."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reward_service.settings import Settings
from verifiers.calibration import SQLiteCalibrationStore
from verifiers.calibration.apply import CALIBRATION, CalibrationPolicy
from verifiers.context import ResourceKey


def policy_from_settings(settings: Settings, store: SQLiteCalibrationStore | None = None) -> CalibrationPolicy:
    """The policy of the configured calibration block, on ``store`` (default: the configured SQLite file)."""
    return CalibrationPolicy(
        store=store if store is not None else SQLiteCalibrationStore(settings.calibration.db),
        default_judge=settings.calibration.appeal_judge,
        wide_interval=settings.calibration.wide_interval,
        min_appeals=settings.calibration.min_appeals,
    )


@asynccontextmanager
async def open_calibration(settings: Settings) -> AsyncIterator[dict[ResourceKey[Any], Any]]:
    store = SQLiteCalibrationStore(settings.calibration.db)
    try:
        yield {CALIBRATION: policy_from_settings(settings, store)}
    finally:
        store.close()
