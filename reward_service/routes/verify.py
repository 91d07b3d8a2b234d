"""POST /v1/verify: one request schema and one verdict schema for every verifier."""
from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from reward_service.admission import AdmissionGate
from reward_service.deps import DISCONNECTED, AdmissionDep, ScopeDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.schemas.item_limits import BodyFacts, check_limits
from reward_service.schemas.verify import VerifyRequest, VerifyResponse, VerifyResult, json_text
from verifiers.engine import Engine, Prepared
from verifiers.engine.cancel import CancelScope
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


def result_dict(p: Prepared, verdict: Verdict) -> dict[str, Any]:
    """``to_result(p, verdict).model_dump()`` without building the model: the streams and jobs make one per item."""
    return {"id": p.item.id, "verifier": p.item.verifier, "score": verdict.score, "status": verdict.status.value,
            "reason": verdict.reason, "details": verdict.details, "elapsed_ms": round(verdict.elapsed_ms, 3),
            "turn_scores": verdict.turn_scores}


def starting_engine(gate: AdmissionGate) -> Engine:
    """The engine, or 503 "server is starting" before the lifespan opened the runtime (draining is refused later,
    by ``run_admitted``)."""
    if gate.runtime is None:
        raise ApiError(503, "server is starting", headers=gate.retry_headers)
    return gate.runtime.engine


async def run_admitted(gate: AdmissionGate, prepared: list[Prepared],
                       scope: CancelScope | None = None) -> list[Verdict]:
    """Run prepared items under admission control (429 + Retry-After when saturated, 503 while draining); with
    ``scope``, items still unfinished when it is cancelled are stopped and answered ``cancelled``."""
    runtime = gate.ready()
    with gate.admit(len(prepared)):
        return await runtime.engine.verify_many(prepared, scope)


NDJSON = "application/x-ndjson"


def stream_verdicts(gate: AdmissionGate, prepared: list[Prepared], body: VerifyRequest,
                    scope: CancelScope) -> StreamingResponse:
    """The verdicts as NDJSON lines in the order they are decided, each ``{"index": i, ...result}``, then one
    ``{"done": true, "groups": ...}`` line. Admission is taken before the answer starts (its 429/503 are the usual
    ones) and held until the last item is decided."""
    runtime = gate.ready()
    admitted = gate.admit(len(prepared))
    admitted.__enter__()
    decided: asyncio.Queue[tuple[int, Verdict] | None] = asyncio.Queue()

    async def work() -> list[Verdict]:
        try:
            return await runtime.engine.verify_many(prepared, scope,
                                                    on_verdict=lambda i, v: decided.put_nowait((i, v)))
        finally:
            admitted.__exit__(None, None, None)
            decided.put_nowait(None)

    task = asyncio.create_task(work())

    def line(i: int, verdict: Verdict) -> bytes:
        return json_text({"index": i, **result_dict(prepared[i], verdict)}).encode() + b"\n"

    async def lines() -> AsyncIterator[bytes]:
        try:
            finished = False
            while not finished:  # what is decided by now goes out in one write
                got = await decided.get()
                out = []
                while got is not None:
                    out.append(line(*got))
                    if decided.empty():
                        break
                    got = decided.get_nowait()
                finished = got is None
                if out:
                    yield b"".join(out)
            verdicts = await task
            groups = None
            if any(item.group is not None for item in body.items):
                groups = group_stats([item.group for item in body.items], [v.score for v in verdicts])
            yield json.dumps({"done": True, "groups": groups}).encode() + b"\n"
        finally:
            if not task.done():  # the reader went away: so does the work
                scope.cancel(DISCONNECTED)
                await asyncio.gather(task, return_exceptions=True)

    return StreamingResponse(lines(), media_type=NDJSON)


@router.post("/v1/verify", response_model=VerifyResponse,
             responses={200: {"content": {NDJSON: {}}, "description": "With Accept: application/x-ndjson, one "
                              "verdict per line as decided, then a done line."}})
async def verify(body: VerifyRequest, settings: SettingsDep, gate: AdmissionDep, scope: ScopeDep,
                 request: Request) -> VerifyResponse | StreamingResponse:
    check_limits(settings.limits, body, BodyFacts.of(await request.body(), settings.limits.max_number_digits))
    prepared = prepare_items(starting_engine(gate), body)
    if NDJSON in request.headers.get("accept", ""):
        return stream_verdicts(gate, prepared, body, scope)
    verdicts = await run_admitted(gate, prepared, scope)
    results = [to_result(p, v) for p, v in zip(prepared, verdicts)]
    groups = None
    if any(item.group is not None for item in body.items):
        groups = group_stats([item.group for item in body.items], [r.score for r in results])
    return VerifyResponse(results=results, groups=groups)
