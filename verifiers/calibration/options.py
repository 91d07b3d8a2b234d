"""The post-processing options every verifier accepts; they live in ``verifiers.options`` beside ``BaseOptions``
(the core must not import the calibration package) and are re-exported here for existing imports."""
from __future__ import annotations

from verifiers.options import AppealOptions, Correction, NoiseRatesOptions

__all__ = ["AppealOptions", "Correction", "NoiseRatesOptions"]
