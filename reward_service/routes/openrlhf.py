"""POST /openrlhf/reward: OpenRLHF's remote reward protocol, so ``--reward.remote_url`` needs no glue code.

OpenRLHF posts ``{"query": [prompt + response], "prompts": [...], "labels": [...]}`` and reads
``{"rewards": [...], "scores": [...], "extra_logs": {name: [float per sample]}}``. Its reward list holds floats
only, so a null verdict becomes ``openrlhf_null_reward`` there; what really happened is in ``extra_logs`` (a
``status_<name>`` one-hot per sample and ``scored``), which OpenRLHF averages into its training logs.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from reward_service.deps import AdmissionDep, ScopeDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.routes.verify import prepare_items, run_admitted, starting_engine
from reward_service.schemas.item_limits import check_limits
from reward_service.schemas.verify import VerifyItemIn, VerifyRequest
from verifiers.types import Status, Verdict

router = APIRouter(tags=["trainers"])


class OpenRLHFRequest(BaseModel):
    # OpenRLHF versions add fields over time (e.g. per-sample metadata); unknown ones are ignored, not refused.
    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(..., description="Prompt and response, decoded together, one per sample.")
    prompts: list[str] | None = Field(None, description="The prompt of each sample (stripped from its query).")
    labels: list[Any] | None = Field(None, description="Reference answer of each sample (from --label_key).")


class OpenRLHFResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]


def split_response(query: str, prompt: str | None, suffixes: list[str]) -> tuple[str, bool]:
    """The response part of a decoded query, and whether its prompt was found in it.

    The prompt is usually a prefix; when the decoder put something before it (BOS, left padding) the text after its
    first occurrence is taken; when it is missing the whole query is scored (answer extraction reads the end).
    Trailing end-of-turn tokens are dropped since a decoder with ``skip_special_tokens=False`` keeps them.
    """
    response, found = query, False
    if prompt:
        at = query.find(prompt)
        if at >= 0:
            response, found = query[at + len(prompt):], True
    trimmed = True
    while trimmed:
        trimmed = False
        response = response.rstrip()
        for suffix in suffixes:
            if suffix and response.endswith(suffix):
                response, trimmed = response[: -len(suffix)], True
    return response, found


def extra_logs(verdicts: list[Verdict], found: list[bool]) -> dict[str, list[float]]:
    """Numeric per-sample logs with the same keys on every call (OpenRLHF turns each into a float)."""
    logs: dict[str, list[float]] = {
        "scored": [float(v.score is not None) for v in verdicts],
        "prompt_found": [float(f) for f in found],
        "verify_ms": [round(v.elapsed_ms, 3) for v in verdicts],
    }
    for status in Status:
        logs[f"status_{status.value}"] = [float(v.status is status) for v in verdicts]
    return logs


@router.post("/openrlhf/reward", response_model=OpenRLHFResponse)
async def openrlhf_reward(
    body: OpenRLHFRequest, settings: SettingsDep, gate: AdmissionDep, scope: ScopeDep
) -> OpenRLHFResponse:
    n = len(body.query)
    for name in ("prompts", "labels"):
        values = getattr(body, name)
        if values is not None and len(values) != n:
            raise ApiError(422, f"{name} has {len(values)} entries for {n} queries", loc=[name])
    if n == 0:
        return OpenRLHFResponse(rewards=[], scores=[], extra_logs=extra_logs([], []))
    engine = starting_engine(gate)
    if settings.openrlhf.verifier not in engine.registry:
        raise ApiError(500, f"openrlhf_verifier {settings.openrlhf.verifier!r} is not a registered verifier; set "
                       f"REWARD_SERVICE_OPENRLHF_VERIFIER to one of: {', '.join(engine.registry.names())}")
    prompts: list[str | None] = list(body.prompts) if body.prompts else [None] * n
    labels: list[Any] = body.labels or [None] * n
    split = [split_response(q, p, settings.openrlhf.strip_suffixes) for q, p in zip(body.query, prompts)]
    request_items = VerifyRequest(items=[
        VerifyItemIn(id=str(i), verifier=settings.openrlhf.verifier, response=response, reference=label,
                     options=settings.openrlhf.options)
        for i, ((response, _), label) in enumerate(zip(split, labels))
    ])
    check_limits(settings.limits, request_items)
    verdicts = await run_admitted(gate, prepare_items(engine, request_items), scope)
    null = settings.openrlhf.null_reward
    rewards = [v.score if v.score is not None else null for v in verdicts]
    return OpenRLHFResponse(
        rewards=rewards,
        scores=[min(1.0, max(0.0, r)) for r in rewards],
        extra_logs=extra_logs(verdicts, [f for _, f in split]),
    )
