"""Wire models of the HTTP API. The verdict fields mirror ``verifiers.types.Verdict``."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class VerifyItemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, description="Echoed back in the result.")
    verifier: str = Field(
        ..., min_length=1, max_length=200, description="A registered verifier name (GET /v1/verifiers).")
    response: str = Field(..., description="The model output to check.")
    reference: Any = Field(None, description="Gold answer, tests, rubric...: its shape depends on the verifier.")
    options: dict[str, Any] = Field(default_factory=dict, description="Verifier options (see its options_schema).")
    group: str | None = Field(None, description="Items sharing a group id form one GRPO group.")


class VerifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[VerifyItemIn]


class VerifyResult(BaseModel):
    id: str | None
    verifier: str
    score: float | None
    status: str
    reason: str
    details: dict[str, Any]
    elapsed_ms: float


class GroupStats(BaseModel):
    count: int
    null_count: int
    mean: float | None
    std: float | None = Field(description="Population standard deviation of the non-null scores.")
    all_equal: bool = Field(description="Every item scored and all scores equal: the group carries no signal.")


class VerifyResponse(BaseModel):
    results: list[VerifyResult]
    groups: dict[str, GroupStats] | None = Field(
        None, description="Per-group statistics, present when any item carries a group id."
    )
