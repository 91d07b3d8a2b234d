"""Verifier calibration: how often a verifier configuration is wrong, and rewards corrected for it.

- ``rates``: counts → FP rate ρ0 and FN rate ρ1 with Wilson intervals; the online ρ1 estimate from appeals.
- ``key``: which configuration a count belongs to (name, version, hash of the options that change verdicts).
- ``store``: the ``CalibrationStore`` interface and its SQLite implementation.
- ``correction``: backward and forward corrections (Cai et al., arXiv 2510.00915 §3).
- ``apply``: the engine's post-processing step (appeal, then correction) on one raw verdict.
"""
from verifiers.calibration.key import ConfigKey, config_key
from verifiers.calibration.rates import AppealCounts, Calibration, Counts, Rate, wilson
from verifiers.calibration.store import CalibrationStore, SQLiteCalibrationStore

__all__ = [
    "AppealCounts", "Calibration", "CalibrationStore", "ConfigKey", "Counts", "Rate", "SQLiteCalibrationStore",
    "config_key", "wilson",
]
