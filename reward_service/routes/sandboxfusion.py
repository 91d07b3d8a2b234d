"""POST /run_code: SandboxFusion's API on our sandbox, so a verl user switches by changing the sandbox URL.

Client mistakes (bad limits, paths, base64) are 422s naming the field, as SandboxFusion's validation answers them;
anything that is our fault (no sandbox, a language this host lacks, a backend failure) is a 200 with status
SandboxError, as SandboxFusion reports its own faults, so no client reads it as the program's verdict.
SandboxFusion clients send no headers: with a server token set, the URL carries ``?token=`` (as for /openrlhf).
"""
from __future__ import annotations

import base64
import binascii
import logging
import os
from dataclasses import replace

from fastapi import APIRouter

from reward_service.deps import AdmissionDep, ScopeDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.routes.sandbox import admitted_run, safe_relative
from reward_service.schemas.jupyter import RunJupyterRequest
from reward_service.schemas.sandboxfusion import NO_MEMORY_LIMIT, RunCodeRequest, RunCodeResponse, to_response
from reward_service.settings import Settings
from sandbox.api import Backend, Limits, RunRequest
from sandbox.languages import LANGUAGES, source_file
from sandbox.paths import WORK_DIR, collect_problem, files_problem
from verifiers.context import SANDBOX

log = logging.getLogger(__name__)
router = APIRouter(tags=["sandboxfusion"])
SANDBOXFUSION_WALL_FACTOR = 2.0  # run_timeout's wall-clock backstop, in run_timeouts


def pod() -> str | None:
    return os.environ.get("MY_POD_NAME")  # SandboxFusion's name for the executor (Kubernetes downward API)


def _limits(settings: Settings, body: RunCodeRequest, notes: list[str]) -> Limits:
    """SandboxFusion's limits within the server caps; the rest take the server defaults. A timeout over its cap is
    run at the cap and said in ``notes`` (clients such as LiveCodeBench's send run_timeout=103, which SandboxFusion
    accepts); a memory limit over its cap is a 422 naming the field."""
    caps, defaults = settings.sandbox.caps, settings.sandbox.defaults
    run_timeout = min(body.run_timeout, caps.wall_s)
    if run_timeout < body.run_timeout:
        notes.append(f"run_timeout={body.run_timeout:g} was clamped to the server's maximum of {caps.wall_s:g}s")
    compile_timeout = min(body.compile_timeout, settings.sandbox.compile_wall_s)
    if compile_timeout < body.compile_timeout:
        notes.append(f"compile_timeout={body.compile_timeout:g} was clamped to the server's compile budget of "
                     f"{settings.sandbox.compile_wall_s:g}s")
    memory = defaults.memory_mb if body.memory_limit_MB == NO_MEMORY_LIMIT else body.memory_limit_MB
    if memory > caps.memory_mb:
        raise ApiError(422, f"memory_limit_MB={memory} exceeds the server cap of {caps.memory_mb}",
                       loc=["memory_limit_MB"])
    # run_timeout is the program's CPU time (its processes together), so the verdict does not depend on the machine's
    # load; the wall clock is a backstop at twice that (within the cap), for a program that sleeps or blocks. A
    # client such as verl waits compile_timeout + run_timeout + 10 s, and sends compile_timeout = run_timeout.
    return replace(Limits(**{
        **defaults.model_dump(), "wall_s": min(caps.wall_s, SANDBOXFUSION_WALL_FACTOR * run_timeout),
        "cpu_s": min(run_timeout, caps.cpu_s), "memory_mb": memory}), compile_s=compile_timeout)


def work_path(name: str) -> str | None:
    """A path inside the run's work dir, relative to it: SandboxFusion clients may name files by absolute path in
    the work dir (``/work/out.txt`` here); None for anything outside it."""
    if name.startswith(WORK_DIR + "/"):
        name = name[len(WORK_DIR) + 1:]
    return name if safe_relative(name) else None


def files_in(body: RunCodeRequest | RunJupyterRequest) -> dict[str, str]:
    """Base64 files as text (our sandbox writes UTF-8 text files); null content is skipped, as SandboxFusion does."""
    out: dict[str, str] = {}
    for name, content in body.files.items():
        if content is None:
            continue
        relative = work_path(name)
        if relative is None:
            raise ApiError(422, f"file name {name!r} must be a path inside the work dir ({WORK_DIR})",
                           loc=["files", name])
        try:
            out[relative] = base64.b64decode(content, validate=True).decode("utf-8")
        except (binascii.Error, ValueError) as exc:
            kind = "not UTF-8 text (binary files are not supported)" if isinstance(exc, UnicodeDecodeError) \
                else "not valid base64"
            raise ApiError(422, f"file {name!r} is {kind}", loc=["files", name]) from None
    for i, name in enumerate(body.fetch_files):
        if work_path(name) is None:
            raise ApiError(422, f"fetch_files entry {name!r} must be a path inside the work dir ({WORK_DIR})",
                           loc=["fetch_files", i])
    problem = collect_problem(fetched_names(body))
    if problem:
        raise ApiError(422, problem, loc=["fetch_files"])
    return out


def fetched_names(body: RunCodeRequest | RunJupyterRequest) -> list[str]:
    return [work_path(name) or name for name in body.fetch_files]


def fetched(body: RunCodeRequest | RunJupyterRequest, files: dict[str, str]) -> dict[str, str]:
    """The fetched files, base64, under the names the client asked for them by."""
    out = {}
    for name in body.fetch_files:
        text = files.get(work_path(name) or name)
        if text is not None:
            out[name] = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return out


def _unavailable(backend: Backend, body: RunCodeRequest) -> str:
    """Why this language cannot run here, or '' when it can."""
    ours = body.our_language()
    if ours is None:
        return f"language {body.language!r} is not offered by this server (see GET /v1/sandbox/languages)"
    if not backend.languages().get(ours):
        info = backend.language_info().get(ours) or {}
        reason = info.get("reason") or backend.reason  # a disabled sandbox says why
        return f"language {body.language!r} is not available on this host" + (f": {reason}" if reason else "")
    return ""


def _compiled(backend: Backend, language: str) -> bool:
    info = backend.language_info().get(language)
    if info is not None and "compiled" in info:
        return bool(info["compiled"])
    return any(spec.name == language and spec.compile for spec in LANGUAGES)


@router.post("/run_code", response_model=RunCodeResponse)
async def run_code(body: RunCodeRequest, settings: SettingsDep, gate: AdmissionDep,
                   scope: ScopeDep) -> RunCodeResponse:
    backend = gate.ready().resources.get(SANDBOX)
    if backend is None:
        return RunCodeResponse.sandbox_error("no sandbox is configured on this server", pod())
    notes: list[str] = []
    limits = _limits(settings, body, notes)
    files = files_in(body)
    stdin = body.stdin or ""
    size = len(body.code) + len(stdin) + sum(len(v) for v in files.values())
    if size > settings.sandbox.max_input_chars:
        raise ApiError(413, f"code + stdin + files hold {size} characters, over the limit of "
                            f"{settings.sandbox.max_input_chars}")
    why = _unavailable(backend, body)
    if why:
        return RunCodeResponse.sandbox_error(why, pod())
    language = body.our_language()
    assert language is not None
    problem = files_problem(list(files), program=source_file(language, body.code))
    if problem:  # two names for one file, a file that is another's directory, the program's own source, too many
        raise ApiError(422, problem, loc=["files"])
    run = RunRequest(code=body.code, language=language, stdin=stdin, files=files, collect=fetched_names(body),
                     limits=limits)
    try:
        [result] = await admitted_run(gate, backend, [run], scope=scope)
    except ApiError:
        raise
    except Exception as exc:
        log.exception("sandbox failure on /run_code")
        return RunCodeResponse.sandbox_error(f"sandbox failure: {type(exc).__name__}: {exc}", pod())
    answer = to_response(result, _compiled(backend, language), fetched(body, result.files), pod())
    if notes:
        answer.message = "; ".join([*notes, *([answer.message] if answer.message else [])])
    return answer


@router.get("/v1/ping")
async def ping() -> str:
    """SandboxFusion's liveness probe: its clients wait for "pong" before sending work."""
    return "pong"
