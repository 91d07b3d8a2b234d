"""POST /run_jupyter: SandboxFusion's notebook API. The cells run in order in one Python interpreter inside one
sandbox run (sandbox/support/jupyter_driver.py), which is opened and closed with the request; each cell's stdout,
stderr, last expression (``display``) and exception (``error``) come back in SandboxFusion's shape. As in
SandboxFusion, a cell's exception is in its ``error`` and the request still Succeeds; a run stopped by its total
timeout is Failed with no cells."""
from __future__ import annotations

import json
import logging
import secrets
from functools import lru_cache

from fastapi import APIRouter

from reward_service.deps import AdmissionDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.routes.sandbox import admitted_run
from reward_service.routes.sandboxfusion import fetched, fetched_names, files_in, pod
from reward_service.schemas.jupyter import CellRunResult, RunJupyterRequest, RunJupyterResponse
from reward_service.schemas.sandboxfusion import NO_MEMORY_LIMIT, ApiStatus, CommandRunResult, CommandStatus
from sandbox.api import Limits, RunRequest, RunResult, RunStatus
from sandbox.languages import SUPPORT_DIR
from verifiers.context import SANDBOX

log = logging.getLogger(__name__)
router = APIRouter(tags=["sandboxfusion"])


@lru_cache(maxsize=1)
def _driver() -> str:
    return (SUPPORT_DIR / "jupyter_driver.py").read_text()


def _cells(result: RunResult, nonce: str, count: int) -> list[CellRunResult]:
    found: dict[int, CellRunResult] = {}
    prefix = nonce + " "
    for line in result.stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            record = json.loads(line[len(prefix):])
        except ValueError:
            continue
        index = record.pop("i", None) if isinstance(record, dict) else None
        if isinstance(index, int) and 0 <= index < count and index not in found:
            found[index] = CellRunResult(**record)
    missing = CellRunResult(error=[{"ename": "NotRun", "evalue": f"the run ended ({result.status.value}: "
                                    f"{result.reason}) before this cell finished", "traceback": []}])
    return [found.get(i, missing) for i in range(count)]


@router.post("/run_jupyter", response_model=RunJupyterResponse)
async def run_jupyter(body: RunJupyterRequest, settings: SettingsDep, gate: AdmissionDep) -> RunJupyterResponse:
    backend = gate.ready().resources.get(SANDBOX)
    if backend is None or not backend.languages().get("python"):
        return RunJupyterResponse(status=ApiStatus.SANDBOX_ERROR, message="no Python sandbox on this server",
                                  executor_pod_name=pod())
    caps, defaults = settings.sandbox.caps, settings.sandbox.defaults
    total = min(body.total_timeout, caps.wall_s)
    notes = [f"total_timeout={body.total_timeout:g} was clamped to the server's maximum of {caps.wall_s:g}s"] \
        if total < body.total_timeout else []
    memory = defaults.memory_mb if body.memory_limit_MB == NO_MEMORY_LIMIT else body.memory_limit_MB
    if memory <= 0 or memory > caps.memory_mb:
        raise ApiError(422, f"memory_limit_MB={memory} must be positive and at most {caps.memory_mb}",
                       loc=["memory_limit_MB"])
    files = files_in(body)
    nonce = secrets.token_hex(16)
    stdin = json.dumps({"nonce": nonce, "cells": body.cells, "cell_timeout": body.cell_timeout})
    size = len(stdin) + sum(len(v) for v in files.values())
    if size > settings.sandbox.max_input_chars:
        raise ApiError(413, f"cells + files hold {size} characters, over the limit of "
                            f"{settings.sandbox.max_input_chars}")
    limits = Limits(**{**defaults.model_dump(), "wall_s": total, "cpu_s": min(total, caps.cpu_s), "memory_mb": memory})
    run = RunRequest(code=_driver(), language="python", stdin=stdin, files=files, collect=fetched_names(body),
                     limits=limits)
    try:
        [result] = await admitted_run(gate, backend, [run])
    except ApiError:
        raise
    except Exception as exc:
        log.exception("sandbox failure on /run_jupyter")
        return RunJupyterResponse(status=ApiStatus.SANDBOX_ERROR, message=f"sandbox failure: {exc}",
                                  executor_pod_name=pod())
    if result.status == RunStatus.SANDBOX_ERROR:
        return RunJupyterResponse(status=ApiStatus.SANDBOX_ERROR, message=result.reason, executor_pod_name=pod())
    seconds = round(result.wall_ms / 1000, 6)
    stdout = "\n".join(line for line in result.stdout.splitlines() if not line.startswith(nonce + " "))
    if result.status == RunStatus.TIMEOUT:
        driver = CommandRunResult(status=CommandStatus.TIME_LIMIT_EXCEEDED, execution_time=seconds, stdout=stdout,
                                  stderr=result.stderr)
        return RunJupyterResponse(status=ApiStatus.FAILED, message="; ".join([*notes, result.reason]), driver=driver,
                                  executor_pod_name=pod())
    code = -result.signal if result.signal else (result.exit_code or 0)
    driver = CommandRunResult(status=CommandStatus.FINISHED, execution_time=seconds, return_code=code,
                              stdout=stdout, stderr=result.stderr)
    ok = result.status == RunStatus.OK
    return RunJupyterResponse(status=ApiStatus.SUCCESS if ok else ApiStatus.FAILED,
                              message="; ".join([*notes, *([] if ok else [result.reason])]), driver=driver,
                              cells=_cells(result, nonce, len(body.cells)), executor_pod_name=pod(),
                              files=fetched(body, result.files))
