"""The options every verifier accepts (``BaseOptions``) and the post-processing options among them.

This module sits at the bottom of the library (it imports only pydantic): the verifier contract builds on it, and
the calibration stage reads the ``correction`` / ``appeal`` / ``noise_rates`` fields without the core importing
the calibration package.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Correction = Literal["none", "backward", "forward"]


class AppealOptions(BaseModel):
    """Send rule-based negatives to a judge verifier for a second opinion."""

    model_config = ConfigDict(extra="forbid")

    judge: str | None = Field(
        None, description="Verifier that rechecks negatives; default: the `appeal_judge` setting.")
    share: float = Field(1.0, gt=0.0, le=1.0, description="Share of negatives appealed (a deterministic hash sample).")
    options: dict[str, Any] = Field(default_factory=dict, description="Options passed to the judge verifier.")


class NoiseRatesOptions(BaseModel):
    """Rates a caller measured elsewhere; they take precedence over the calibration store."""

    model_config = ConfigDict(extra="forbid")

    rho0: float | None = Field(None, ge=0.0, lt=1.0, description="FP rate P(verdict 1 | wrong); backward needs it.")
    rho1: float = Field(..., ge=0.0, lt=1.0, description="FN rate P(verdict 0 | right).")


class BaseOptions(BaseModel):
    """Options every verifier accepts; verifiers subclass this with their own fields."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float | None = Field(
        default=None, gt=0, description="Per-item deadline in seconds (capped by the server's maximum)."
    )
    # Noise correction and appeals, applied by the calibration stage after the raw verdict; binary
    # verifiers only.
    correction: Correction = Field(
        "none", description="none | backward (unbiased surrogate reward) | forward (policy-gradient weights)."
    )
    appeal: AppealOptions | None = Field(None, description="Recheck rule-based negatives with a judge verifier.")
    noise_rates: NoiseRatesOptions | None = Field(None, description="Known rates; otherwise the calibration store.")

    @field_validator("appeal", mode="before")
    @classmethod
    def _appeal_shorthand(cls, value: Any) -> Any:
        return {} if value is True else None if value is False else value
