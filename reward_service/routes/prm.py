"""POST /v1/prm/score: step scores of a process reward model, aggregated per item.

Each item runs as a ``prm`` verifier item through the engine, like every verifier: under its deadline, counted in
the item metrics, with failures named (``timeout``, ``error``). A model that is loading or failed to load answers
503 for the whole request, as before.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from reward_service.deps import AdmissionDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.resources.runtime import Runtime
from reward_service.settings import Settings
from verifiers.kinds.reward_models.aggregate import Aggregation
from verifiers.kinds.reward_models.hub import MODELS, UnknownModel
from verifiers.kinds.reward_models.steps import SplitRule
from verifiers.types import Status, Verdict, VerifyItem

router = APIRouter(tags=["reward models"])


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
    status: str = Field("ok", description="ok, no_answer (no steps in the response), or error / timeout (score null).")
    reason: str = ""
    step_rewards: list[float] | None = Field(None, description="Per-step rewards of clip/delta (dense credit).")


class PrmResponse(BaseModel):
    model: str
    aggregation: str
    results: list[PrmResult]


def _check(s: Settings, body: PrmRequest) -> None:
    if not body.items:
        raise ApiError(422, "items must hold at least one item", loc=["items"])
    if len(body.items) > s.limits.max_batch_items:
        raise ApiError(413, f"batch of {len(body.items)} items exceeds the limit of {s.limits.max_batch_items}; "
                       "split it", loc=["items"])
    for i, item in enumerate(body.items):
        size = len(item.response) if item.response is not None else sum(map(len, item.steps or []))
        if size + len(item.prompt) > s.limits.max_response_chars:
            raise ApiError(413, f"items[{i}] has {size + len(item.prompt)} characters, over the limit of "
                           f"{s.limits.max_response_chars}", loc=["items", i])


def _check_model(runtime: Runtime, name: str) -> None:
    """422 unless ``name`` is a configured PRM (the ``prm`` verifier would answer ``unavailable`` per item)."""
    hub = runtime.resources.get(MODELS)
    if hub is None:
        raise ApiError(422, f"unknown model {name!r}: no reward model is configured on this server", loc=["model"])
    try:
        spec = hub.spec(name)
    except UnknownModel as exc:
        raise ApiError(422, str(exc), loc=["model"]) from None
    if spec.kind != "prm":
        raise ApiError(422, f"model {name!r} is an outcome model; score it with verifier 'orm' on /v1/verify",
                       loc=["model"])


def _verify_item(body: PrmRequest, item: PrmItem) -> VerifyItem:
    """The ``prm`` verifier item for one request item: the prompt is its reference, given steps an option."""
    options: dict[str, Any] = {"model": body.model, "aggregation": body.aggregation, "threshold": body.threshold,
                               "split": body.split, "steps": item.steps}
    return VerifyItem("prm", item.response or "", item.prompt, options, id=item.id)


def _result(item: PrmItem, verdict: Verdict) -> PrmResult:
    d = verdict.details
    if verdict.status is Status.OK:
        return PrmResult(id=item.id, step_scores=d["step_scores"], score=verdict.score, first_error=d["first_error"],
                         step_rewards=d["step_rewards"])
    return PrmResult(id=item.id, step_scores=[], score=verdict.score, first_error=None, status=verdict.status.value,
                     reason=verdict.reason)


@router.post("/v1/prm/score", response_model=PrmResponse)
async def prm_score(body: PrmRequest, settings: SettingsDep, gate: AdmissionDep) -> PrmResponse:
    _check(settings, body)
    runtime = gate.ready()
    _check_model(runtime, body.model)
    prepared = [runtime.engine.prepare(_verify_item(body, item)) for item in body.items]
    with gate.admit(len(prepared)):
        verdicts = await runtime.engine.verify_many(prepared)
    down = next((v for v in verdicts if v.status is Status.UNAVAILABLE), None)
    if down is not None:  # the model is loading or failed to load: the whole request is refused, as it always was
        raise ApiError(503, down.reason, headers=gate.retry_headers)
    return PrmResponse(model=body.model, aggregation=body.aggregation,
                       results=[_result(item, v) for item, v in zip(body.items, verdicts)])
