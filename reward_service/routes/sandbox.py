"""POST /v1/sandbox/run, POST /v1/sandbox/run_batch, GET /v1/sandbox/languages."""
from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter

from reward_service.admission import AdmissionGate
from reward_service.deps import AdmissionDep, ScopeDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.schemas.sandbox import LanguageOut, RunBatchIn, RunBatchOut, RunIn, RunOut
from reward_service.settings import SandboxSettings
from sandbox.api import Backend, Limits, RunRequest, RunResult, RunStatus, run_source, wall_backstop
from sandbox.languages import canonical_name, source_file
from sandbox.limits import over_caps
from sandbox.paths import collect_problem, files_problem, path_problem
from verifiers.context import SANDBOX
from verifiers.engine.cancel import CancelScope

router = APIRouter(tags=["sandbox"])


def _backend(gate: AdmissionGate) -> Backend:
    backend = gate.ready().resources.get(SANDBOX)
    if backend is None:
        raise ApiError(503, "no sandbox is configured on this server")
    return backend


def safe_relative(path: str) -> bool:
    return not path_problem(path)


def to_request(s: SandboxSettings, backend: Backend, item: RunIn, loc: list[Any]) -> RunRequest:
    """Validate one item against the host's languages and the server caps (422 with its location)."""
    language = canonical_name(item.language)
    offered = backend.languages()
    if language not in offered:
        raise ApiError(422, f"unknown language {item.language!r}; known: {', '.join(sorted(offered))}",
                       loc=[*loc, "language"])
    if not offered[language]:
        raise ApiError(422, f"language {language!r} is not available on this host (see GET /v1/sandbox/languages)",
                       loc=[*loc, "language"])
    size = (len(item.code) + len(item.stdin) + sum(len(v) for v in item.files.values())
            + sum(len(a) for a in item.args))
    if size > s.max_input_chars:
        raise ApiError(413, f"code + stdin + files + args hold {size} characters, over the limit of "
                            f"{s.max_input_chars}", loc=loc)
    for i, arg in enumerate(item.args):
        if "\0" in arg:
            raise ApiError(422, "an argument cannot contain a NUL character", loc=[*loc, "args", i])
    problem = files_problem(list(item.files), program=source_file(language, item.code))
    if problem:
        raise ApiError(422, problem, loc=[*loc, "files"])
    problem = collect_problem(item.collect)
    if problem:
        raise ApiError(422, problem, loc=[*loc, "collect"])
    given = item.limits.model_dump(exclude_none=True)
    limits = Limits(**{**s.defaults.model_dump(), **given})
    if "wall_s" not in given:
        # the verdict is the CPU budget's: the wall clock, left to the server, is its backstop (never below the
        # server's default wall, never above its cap), so load does not time out a program that computes
        limits.wall_s = max(s.defaults.wall_s, min(s.caps.wall_s, wall_backstop(limits.cpu_s)))
    problems = over_caps(limits, s.caps.to_limits())
    if problems:
        raise ApiError(422, "limits: " + "; ".join(problems), loc=[*loc, "limits"])
    return item.to_request(language, limits)


async def admitted_run(gate: AdmissionGate, backend: Backend, requests: list[RunRequest],
                       output_budget: int | None = None, scope: CancelScope | None = None) -> list[RunResult]:
    """Run the admitted requests, as one source taking its turns at the sandbox's slots. With ``output_budget``,
    each result is charged its output as it finishes, so the server never holds (nor sends) more than the budget of
    the request's output plus what is still running: a batch of thousands of programs each printing its own budget
    would otherwise be held whole until the last one ends. With ``scope``, runs still waiting or running when it is
    cancelled are stopped (their sandboxes destroyed with every process in them) and answered ``cancelled``."""
    with gate.admit(len(requests)):
        left = None if output_budget is None else [output_budget]
        token = run_source.set(run_source.get() or object())
        try:
            return list(await asyncio.gather(*(_one(backend, r, left, scope) for r in requests)))
        finally:
            run_source.reset(token)


def cancelled_run(reason: str) -> RunResult:
    return RunResult(RunStatus.CANCELLED, reason=f"cancelled: {reason}")


async def _one(backend: Backend, request: RunRequest, left: list[int] | None, scope: CancelScope | None) -> RunResult:
    result = await (backend.run(request) if scope is None else scope.guard(backend.run(request), cancelled_run))
    return result if left is None or result.status is RunStatus.CANCELLED else _charged(result, left)


def _charged(result: RunResult, left: list[int]) -> RunResult:
    size = _sent_size(result)
    if size <= left[0]:
        left[0] -= size
        return result
    left[0] = 0  # later, smaller items do not slip in: every item past the budget is told the same
    result.stdout = result.stderr = result.compile_output = ""
    result.files = {}
    if result.status is RunStatus.OK:
        result.status = RunStatus.OUTPUT_EXCEEDED
    result.truncated = True
    note = "output dropped: the request's output budget (sandbox_max_request_output_bytes) was spent"
    result.reason = f"{result.reason}; {note}" if result.reason else note
    return result


def _sent_size(result: RunResult) -> int:
    """The result's output as the answer carries it (JSON text: a NUL is six bytes, not one)."""
    texts = [result.stdout, result.stderr, result.compile_output, *result.files, *result.files.values()]
    return sum(len(json.dumps(text)) for text in texts)


@router.post("/v1/sandbox/run", response_model=RunOut)
async def run(body: RunIn, settings: SettingsDep, gate: AdmissionDep, scope: ScopeDep) -> RunOut:
    backend = _backend(gate)
    req = to_request(settings.sandbox, backend, body, loc=[])
    [result] = await admitted_run(gate, backend, [req], scope=scope)
    return RunOut.of(result, body.id)


@router.post("/v1/sandbox/run_batch", response_model=RunBatchOut)
async def run_batch(body: RunBatchIn, settings: SettingsDep, gate: AdmissionDep, scope: ScopeDep) -> RunBatchOut:
    backend = _backend(gate)
    n = len(body.items)
    if n == 0:
        raise ApiError(422, "items must hold at least one item", loc=["items"])
    if n > settings.limits.max_batch_items:
        raise ApiError(413, f"batch of {n} items exceeds the limit of {settings.limits.max_batch_items}; split it",
                       loc=["items"])
    reqs = [to_request(settings.sandbox, backend, item, loc=["items", i]) for i, item in enumerate(body.items)]
    results = await admitted_run(gate, backend, reqs, settings.sandbox.max_request_output_bytes, scope)
    return RunBatchOut(results=[RunOut.of(r, item.id) for r, item in zip(results, body.items)])


@router.get("/v1/sandbox/languages", response_model=dict[str, LanguageOut])
async def languages(gate: AdmissionDep) -> dict[str, LanguageOut]:
    backend = _backend(gate)
    return {k: LanguageOut(**v) for k, v in backend.language_info().items()}
