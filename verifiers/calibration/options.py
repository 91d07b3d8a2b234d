"""The generic post-processing options every verifier accepts (see ``verifiers.base.BaseOptions``)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Correction = Literal["none", "backward", "forward"]


class AppealOptions(BaseModel):
    """Send rule-based negatives to a judge verifier for a second opinion."""

    model_config = ConfigDict(extra="forbid")

    judge: str | None = Field(None, description="Verifier that rechecks negatives; default: the `appeal_judge` setting.")
    share: float = Field(1.0, gt=0.0, le=1.0, description="Share of negatives appealed (a deterministic hash sample).")
    options: dict[str, Any] = Field(default_factory=dict, description="Options passed to the judge verifier.")


class NoiseRatesOptions(BaseModel):
    """Rates a caller measured elsewhere; they take precedence over the calibration store."""

    model_config = ConfigDict(extra="forbid")

    rho0: float | None = Field(None, ge=0.0, lt=1.0, description="FP rate P(verdict 1 | wrong); backward needs it.")
    rho1: float = Field(..., ge=0.0, lt=1.0, description="FN rate P(verdict 0 | right).")
