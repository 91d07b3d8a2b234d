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
from reward_service.schemas.item_limits import check_conversation, json_chars, number_problem, surrogate_path
from reward_service.schemas.verify import VerifyItemIn, VerifyRequest, VerifyResponse, VerifyResult
from reward_service.settings import LimitsSettings
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


MAX_NESTING = 64  # lists/objects inside a reference or options; deeper is never a real gold answer or option set


def nesting_depth(value: Any) -> int:
    """How deep lists and objects nest in a JSON value, without recursion (a hostile body can nest thousands deep)."""
    if not isinstance(value, (list, dict)):
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack:  # only containers are pushed: scalars (most of a body) cost one isinstance each
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node)
                     if isinstance(v, (list, dict)))
    return deepest


def check_limits(limits: LimitsSettings, body: VerifyRequest) -> None:
    """The batch and each item within the configured limits (413/422 naming the offending field)."""
    n = len(body.items)
    if n == 0:
        raise ApiError(422, "items must hold at least one item", loc=["items"])
    if n > limits.max_batch_items:
        raise ApiError(413, f"batch of {n} items exceeds the limit of {limits.max_batch_items}; split it",
                       loc=["items"])
    for i, item in enumerate(body.items):
        for name, value in (("reference", item.reference), ("options", item.options), ("tools", item.tools)):
            depth = nesting_depth(value)
            if depth > MAX_NESTING:
                raise ApiError(422, f"items[{i}].{name} is nested {depth} levels deep, over the limit of "
                                    f"{MAX_NESTING}", loc=["items", i, name])
        bad = surrogate_path({"response": item.response, "reference": item.reference, "id": item.id,
                              "group": item.group, "options": item.options})
        if bad is not None:
            raise ApiError(422, f"items[{i}].{'.'.join(map(str, bad))} holds a lone UTF-16 surrogate, which is not "
                                "valid Unicode text; encode the text as UTF-8", loc=["items", i, *bad])
        if item.response is not None and len(item.response) > limits.max_response_chars:
            raise ApiError(
                413, f"items[{i}].response has {len(item.response)} characters, over the limit of "
                f"{limits.max_response_chars}", loc=["items", i, "response"],
            )
        if item.reference is not None and not isinstance(item.reference, (int, float, bool)):
            size = json_chars(item.reference)
            if size > limits.max_reference_chars:
                raise ApiError(
                    413, f"items[{i}].reference is {size} characters, over the limit of {limits.max_reference_chars}",
                    loc=["items", i, "reference"],
                )
        check_item_values(limits, i, item)
        messages = item.message_dicts()
        if messages is not None:
            check_conversation(limits, i, messages, item.tools)


def check_item_values(limits: LimitsSettings, i: int, item: VerifyItemIn) -> None:
    """Ids, options and numbers of one item within the configured limits."""
    for name in ("id", "group"):
        value = getattr(item, name)
        if value is not None and len(value) > limits.max_id_chars:
            raise ApiError(422, f"items[{i}].{name} has {len(value)} characters, over the limit of "
                                f"{limits.max_id_chars}", loc=["items", i, name])
    if item.options and (size := json_chars(item.options)) > limits.max_options_chars:
        raise ApiError(413, f"items[{i}].options is {size} characters, over the limit of {limits.max_options_chars}",
                       loc=["items", i, "options"])
    for name, value in (("reference", item.reference), ("options", item.options), ("tools", item.tools)):
        problem = number_problem(value, limits.max_number_digits)
        if problem is not None:
            at, what = problem
            raise ApiError(422, f"items[{i}].{'.'.join(map(str, (name, *at)))} {what}", loc=["items", i, name, *at])


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
        return json.dumps({"index": i, **result_dict(prepared[i], verdict)}).encode() + b"\n"

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
    check_limits(settings.limits, body)
    prepared = prepare_items(starting_engine(gate), body)
    if NDJSON in request.headers.get("accept", ""):
        return stream_verdicts(gate, prepared, body, scope)
    verdicts = await run_admitted(gate, prepared, scope)
    results = [to_result(p, v) for p, v in zip(prepared, verdicts)]
    groups = None
    if any(item.group is not None for item in body.items):
        groups = group_stats([item.group for item in body.items], [r.score for r in results])
    return VerifyResponse(results=results, groups=groups)
