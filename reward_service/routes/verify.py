"""POST /v1/verify: one request schema and one verdict schema for every verifier."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError

from reward_service.admission import AdmissionGate
from reward_service.deps import AdmissionDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.schemas.item_limits import BodyFacts, check_limits
from reward_service.schemas.verify import VerifyRequest, VerifyResponse, VerifyResult
from verifiers.engine import Engine, Prepared
from verifiers.engine.registry import UnknownVerifier
from verifiers.types import Verdict

router = APIRouter(tags=["verify"])


def group_stats(groups: Sequence[str | None], scores: Sequence[float | None]) -> dict[str, dict[str, Any]]:
    """Per-group statistics of a batch (a GRPO group = the rollouts of one prompt), so a trainer can drop groups with
    no signal (DAPO dynamic sampling) without recomputing them: mean and population std over the non-null scores;
    ``all_equal`` is true when every item of the group has a score and they are all the same (a group with a null is
    never reported as signal-free)."""
    members: dict[str, list[float | None]] = {}
    for gid, score in zip(groups, scores):
        if gid is not None:
            members.setdefault(gid, []).append(score)
    out: dict[str, dict[str, Any]] = {}
    for gid, values in members.items():
        mean: float | None
        std: float | None
        present = [v for v in values if v is not None]
        nulls = len(values) - len(present)
        if present:
            mean = math.fsum(present) / len(present)
            std = math.sqrt(math.fsum((v - mean) ** 2 for v in present) / len(present))
        else:
            mean = std = None
        out[gid] = {
            "count": len(values),
            "null_count": nulls,
            "mean": mean,
            "std": std,
            "all_equal": bool(present) and nulls == 0 and max(present) == min(present),
        }
    return out


def prepare_items(engine: Engine, body: VerifyRequest) -> list[Prepared]:
    """Each item resolved to its verifier with validated options (422 for an unknown verifier or bad options)."""
    prepared = []
    for i, item in enumerate(body.items):
        vi = item.to_verify_item()
        try:
            prepared.append(engine.prepare(vi))
        except UnknownVerifier as exc:
            raise ApiError(422, f"items[{i}]: {exc}", loc=["items", i, "verifier"]) from None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors()[:5]
            )
            raise ApiError(422, f"items[{i}].options invalid for {item.verifier!r}: {problems}",
                           loc=["items", i, "options"]) from None
    return prepared


def to_result(p: Prepared, verdict: Verdict) -> VerifyResult:
    return VerifyResult(
        id=p.item.id, verifier=p.item.verifier, score=verdict.score, status=verdict.status.value,
        reason=verdict.reason, details=verdict.details, elapsed_ms=round(verdict.elapsed_ms, 3),
        turn_scores=verdict.turn_scores,
    )


def starting_engine(gate: AdmissionGate) -> Engine:
    """The engine, or 503 "server is starting" before the lifespan opened the runtime (draining is refused later,
    by ``run_admitted``)."""
    if gate.runtime is None:
        raise ApiError(503, "server is starting", headers=gate.retry_headers)
    return gate.runtime.engine


async def run_admitted(gate: AdmissionGate, prepared: list[Prepared]) -> list[Verdict]:
    """Run prepared items under admission control (429 + Retry-After when saturated, 503 while draining)."""
    runtime = gate.ready()
    with gate.admit(len(prepared)):
        return await runtime.engine.verify_many(prepared)


@router.post("/v1/verify", response_model=VerifyResponse)
async def verify(body: VerifyRequest, request: Request, settings: SettingsDep, gate: AdmissionDep) -> VerifyResponse:
    check_limits(settings.limits, body, BodyFacts.of(await request.body(), settings.limits.max_number_digits))
    prepared = prepare_items(starting_engine(gate), body)
    verdicts = await run_admitted(gate, prepared)
    results = [to_result(p, v) for p, v in zip(prepared, verdicts)]
    groups = None
    if any(item.group is not None for item in body.items):
        groups = group_stats([item.group for item in body.items], [r.score for r in results])
    return VerifyResponse(results=results, groups=groups)
