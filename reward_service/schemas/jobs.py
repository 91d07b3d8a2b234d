"""Wire models of the jobs API (``/v1/jobs``): a ``/v1/verify`` body plus a priority and tags, answered at once
with a job id; the job's progress and results so far."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reward_service.schemas.verify import VerifyItemIn, VerifyResult

Priority = Literal["high", "normal", "low"]
JobState = Literal["queued", "running", "done", "cancelled", "lost"]


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[VerifyItemIn]
    priority: Priority = Field("normal", description="high goes before normal, normal before low, in the "
                               "engine's queue, the sandbox's slots and the judges' rate gates.")
    tags: list[str] = Field(default_factory=list, max_length=16,
                            description="Labels for DELETE /v1/jobs?tag=... (a training step, a run name).")


class JobCounts(BaseModel):
    total: int
    done: int = Field(description="Items with a verdict (cancelled ones included).")
    statuses: dict[str, int] = Field(description="Verdicts so far, per status.")


class JobOut(BaseModel):
    id: str
    state: JobState = Field(description="queued, running, done (every item has a verdict), cancelled (deleted: "
                            "unfinished items answered 'cancelled'), lost (accepted by an earlier run of a server "
                            "without a job store: its items are gone; submit again).")
    priority: Priority
    tags: list[str]
    created: float = Field(description="Unix time it was accepted.")
    ended: float | None = Field(None, description="Unix time its last verdict was decided.")
    expires: float | None = Field(None, description="Unix time its results are dropped (ended + jobs_ttl_s).")
    counts: JobCounts
    results: list[VerifyResult | None] | None = Field(
        None, description="Per item in request order, null while undecided (left out with ?results=false).")
    groups: dict[str, Any] | None = Field(None, description="Per-group statistics, once the job is done.")


class JobsListed(BaseModel):
    jobs: list[JobOut] = Field(description="Newest first, without their results.")


class JobsDeleted(BaseModel):
    cancelled: list[str] = Field(description="The jobs whose unfinished items were cancelled.")
