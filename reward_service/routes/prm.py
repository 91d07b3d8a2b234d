"""POST /v1/prm/score: step scores of a process reward model, aggregated per item."""
from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from reward_service.admission import Overloaded
from reward_service.auth import require_token
from reward_service.errors import ApiError
from verifiers.reward_models.aggregate import Aggregation, aggregate, first_error, step_rewards
from verifiers.reward_models.hub import UnknownModel
from verifiers.reward_models.steps import SplitRule, split_steps
from verifiers.types import VerifierUnavailable

router = APIRouter(tags=["reward models"], dependencies=[Depends(require_token)])


class PrmItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, description="Echoed back.")
    prompt: str = Field(..., description="The problem the steps solve.")
    steps: list[str] | None = Field(None, description="The reasoning steps, in order.")
    response: str | None = Field(None, description="The whole response, split into steps by the split rule.")

    @model_validator(mode="after")
    def _one_of(self) -> PrmItem:
        if (self.steps is None) == (self.response is None):
            raise ValueError("give exactly one of 'steps' (a list) or 'response' (text)")
        if self.steps is not None and not self.steps:
            raise ValueError("'steps' must hold at least one step")
        return self


class PrmRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(..., min_length=1, description="A configured PRM name.")
    items: list[PrmItem]
    aggregation: Aggregation = "min"
    threshold: float = Field(0.5, description="A step below it is an error (first_error; clip's eta).")
    split: SplitRule | None = Field(None, description="Split rule for 'response' items (default: the model's).")


class PrmResult(BaseModel):
    id: str | None
    step_scores: list[float]
    score: float | None
    first_error: int | None
    status: str = Field("ok", description="ok, no_answer (no steps in the response), or error (score null).")
    reason: str = ""
    step_rewards: list[float] | None = Field(None, description="Per-step rewards of clip/delta (dense credit).")


class PrmResponse(BaseModel):
    model: str
    aggregation: str
    results: list[PrmResult]


def _check(services: Any, body: PrmRequest) -> None:
    s = services.settings
    if not body.items:
        raise ApiError(422, "items must hold at least one item", loc=["items"])
    if len(body.items) > s.max_batch_items:
        raise ApiError(413, f"batch of {len(body.items)} items exceeds the limit of {s.max_batch_items}; split it",
                       loc=["items"])
    for i, item in enumerate(body.items):
        size = len(item.response) if item.response is not None else sum(map(len, item.steps or []))
        if size + len(item.prompt) > s.max_response_chars:
            raise ApiError(413, f"items[{i}] has {size + len(item.prompt)} characters, over the limit of "
                           f"{s.max_response_chars}", loc=["items", i])


def _hub(services: Any, name: str) -> Any:
    retry = {"Retry-After": str(services.settings.retry_after_s)}
    runtime = services.runtime
    if runtime is None or services.admission.draining:
        raise ApiError(503, "server is starting or shutting down", headers=retry)
    hub = runtime.resources.get("models")
    if hub is None:
        raise ApiError(422, f"unknown model {name!r}: no reward model is configured on this server", loc=["model"])
    try:
        spec = hub.spec(name)
    except UnknownModel as exc:
        raise ApiError(422, str(exc), loc=["model"]) from None
    if spec.kind != "prm":
        raise ApiError(422, f"model {name!r} is an outcome model; score it with verifier 'orm' on /v1/verify",
                       loc=["model"])
    return hub


@router.post("/v1/prm/score", response_model=PrmResponse)
async def prm_score(body: PrmRequest, request: Request) -> PrmResponse:
    services = request.app.state.services
    _check(services, body)
    hub = _hub(services, body.model)
    rule = body.split or hub.spec(body.model).split
    steps = [it.steps if it.steps is not None else split_steps(it.response or "", rule) for it in body.items]
    todo = [i for i, s in enumerate(steps) if s]
    retry = {"Retry-After": str(services.settings.retry_after_s)}
    try:
        with services.admission.admit(len(body.items)):
            scored = await hub.score_steps(body.model, [(body.items[i].prompt, steps[i]) for i in todo])
    except Overloaded as exc:
        services.metrics.rejected.labels("saturated").inc()
        raise ApiError(429, str(exc), headers=retry) from None
    except VerifierUnavailable as exc:
        raise ApiError(503, str(exc), headers=retry) from None
    except asyncio.CancelledError:
        raise
    by_index = dict(zip(todo, scored))
    results = []
    for i, item in enumerate(body.items):
        r = by_index.get(i)
        if r is None:
            results.append(PrmResult(id=item.id, step_scores=[], score=0.0, first_error=None, status="no_answer",
                                     reason="the response holds no steps"))
        elif isinstance(r, BaseException):
            results.append(PrmResult(id=item.id, step_scores=[], score=None, first_error=None, status="error",
                                     reason=f"{type(r).__name__}: {str(r)[:300]}"))
        else:
            results.append(PrmResult(
                id=item.id, step_scores=r, score=aggregate(r, body.aggregation, body.threshold),
                first_error=first_error(r, body.threshold),
                step_rewards=step_rewards(r, body.aggregation, body.threshold),
            ))
    return PrmResponse(model=body.model, aggregation=body.aggregation, results=results)
