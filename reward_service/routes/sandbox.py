"""POST /v1/sandbox/run, POST /v1/sandbox/run_batch, GET /v1/sandbox/languages."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from reward_service.admission import AdmissionGate
from reward_service.auth import require_token
from reward_service.deps import AdmissionDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.sandbox_models import LanguageOut, RunBatchIn, RunBatchOut, RunIn, RunOut
from reward_service.settings import SandboxSettings
from sandbox.api import Limits, RunRequest
from sandbox.languages import canonical_name, source_file
from sandbox.limits import over_caps
from sandbox.paths import collect_problem, files_problem, path_problem

router = APIRouter(tags=["sandbox"], dependencies=[Depends(require_token)])


def _backend(gate: AdmissionGate) -> Any:
    backend = gate.ready().resources.get("sandbox")
    if backend is None:
        raise ApiError(503, "no sandbox is configured on this server")
    return backend


def safe_relative(path: str) -> bool:
    return not path_problem(path)


def to_request(s: SandboxSettings, backend: Any, item: RunIn, loc: list[Any]) -> RunRequest:
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
    problems = over_caps(limits, s.caps.to_limits())
    if problems:
        raise ApiError(422, "limits: " + "; ".join(problems), loc=[*loc, "limits"])
    return item.to_request(language, limits)


async def admitted_run(gate: AdmissionGate, backend: Any, requests: list[RunRequest]) -> list[Any]:
    with gate.admit(len(requests)):
        return list(await backend.run_many(requests))


@router.post("/v1/sandbox/run", response_model=RunOut)
async def run(body: RunIn, settings: SettingsDep, gate: AdmissionDep) -> RunOut:
    backend = _backend(gate)
    req = to_request(settings.sandbox, backend, body, loc=[])
    [result] = await admitted_run(gate, backend, [req])
    return RunOut.of(result, body.id)


@router.post("/v1/sandbox/run_batch", response_model=RunBatchOut)
async def run_batch(body: RunBatchIn, settings: SettingsDep, gate: AdmissionDep) -> RunBatchOut:
    backend = _backend(gate)
    n = len(body.items)
    if n == 0:
        raise ApiError(422, "items must hold at least one item", loc=["items"])
    if n > settings.limits.max_batch_items:
        raise ApiError(413, f"batch of {n} items exceeds the limit of {settings.limits.max_batch_items}; split it",
                       loc=["items"])
    reqs = [to_request(settings.sandbox, backend, item, loc=["items", i]) for i, item in enumerate(body.items)]
    results = await admitted_run(gate, backend, reqs)
    return RunBatchOut(results=[RunOut.of(r, item.id) for r, item in zip(results, body.items)])


@router.get("/v1/sandbox/languages", response_model=dict[str, LanguageOut])
async def languages(gate: AdmissionDep) -> dict[str, LanguageOut]:
    backend = _backend(gate)
    info = getattr(backend, "language_info", None)
    if info is not None:
        return {k: LanguageOut(**v) for k, v in info().items()}
    return {k: LanguageOut(available=v) for k, v in backend.languages().items()}
