"""POST /run_jupyter: SandboxFusion's notebook API, as a ``python`` environment session opened and closed with the
request (environments/kinds/python.py: one interpreter in a sandbox of its own), held by the environments' session
manager like any other (its caps, turns, reaper and metrics), with the request's own limits. Each cell is a step;
its stdout, stderr, last expression (``display``) and exception (``error``) come back in SandboxFusion's shape. As
in SandboxFusion, a cell's exception is in its ``error`` and the request still Succeeds; a cell over
``cell_timeout`` is interrupted (a ``CellTimeout`` error) and the next cell runs in the same interpreter; a request
over its ``total_timeout`` is Failed with no cells. The session is closed at the end, when a step fails, and when
the client goes away (looked at every half second while a cell runs; a cancelled request closes it too)."""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request

from environments.base import EnvResources
from environments.errors import Capacity, EnvError, InvalidRequest
from environments.kinds.python import MAX_CODE_CHARS
from environments.sessions import Session, SessionManager
from environments.wire.http import client_of
from reward_service.deps import AdmissionDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.routes.envs import get_manager
from reward_service.routes.sandboxfusion import fetched_names, files_in, pod
from reward_service.schemas.jupyter import CellRunResult, RunJupyterRequest, RunJupyterResponse
from reward_service.schemas.sandboxfusion import NO_MEMORY_LIMIT, ApiStatus, CommandRunResult, CommandStatus
from verifiers.context import SANDBOX

log = logging.getLogger(__name__)
router = APIRouter(tags=["sandboxfusion"])

# the interpreter's own ends that mean the request's time ran out (its CPU seconds are the total timeout)
_OUT_OF_TIME = {"cpu_exceeded", "lifetime_exceeded"}
# what opening the session and writing its files may take beyond the cells' total
_SETUP_S = 30.0
_WATCH_S = 0.5  # how often a running cell looks whether its client is still there
_FETCH_BYTES = 1 << 20  # a fetched file, at most (sandbox_collect_bytes, as /run_code's)
_FETCH_CHUNK = 256 << 10  # a fetched file's bytes per cell: their base64 fits any cell's output limit over 400 KiB


@dataclass
class _Notebook:
    """What the cells gave so far, and how the request ended."""

    cells: list[CellRunResult] = field(default_factory=list)
    timed_out: bool = False
    ended: str = ""  # why the interpreter ended before the last cell ("" when it did not)


def _cell(obs: dict[str, Any], cell_timeout: bool) -> CellRunResult:
    exc = obs.get("exception")
    error: list[dict[str, Any]] = []
    if cell_timeout:
        error.append({"ename": "CellTimeout", "evalue": "the cell ran past cell_timeout",
                      "traceback": str((exc or {}).get("traceback", "")).splitlines(keepends=True)})
    elif exc:
        error.append({"ename": exc.get("type", ""), "evalue": exc.get("message", ""),
                      "traceback": str(exc.get("traceback", "")).splitlines(keepends=True)})
    value = obs.get("value")
    return CellRunResult(stdout=obs.get("stdout") or "", stderr=obs.get("stderr") or "",
                         display=[{"text/plain": value}] if value is not None else [], error=error)


def _not_run(why: str) -> CellRunResult:
    return CellRunResult(error=[{"ename": "NotRun", "evalue": f"the interpreter ended ({why}) before this cell ran",
                                 "traceback": []}])


@dataclass
class _Cell:
    """Steps of the request's session, each watched for its client going away."""

    manager: SessionManager
    session: Session
    request: Request

    async def step(self, code: str, timeout_s: float) -> tuple[dict[str, Any], bool] | None:
        """One cell: (observation, whether the interpreter ended), or None when the client went away while it ran
        (the cell is then stopped, and its session closed by the caller)."""
        running = asyncio.ensure_future(self.manager.step(self.session, {"code": code}, timeout_s))
        try:
            while True:
                done, _ = await asyncio.wait([running], timeout=_WATCH_S)
                if done:
                    obs, _reward, ended = running.result()
                    return obs, ended
                if await self.request.is_disconnected():
                    return None
        finally:
            if not running.done():
                running.cancel()
                with contextlib.suppress(BaseException):
                    await running


async def _run_cells(cell: _Cell, body: RunJupyterRequest, deadline: float) -> _Notebook:
    book = _Notebook()
    for source in body.cells:
        left = deadline - time.monotonic()
        if left <= 0:
            book.timed_out = True
            return book
        per_cell = body.cell_timeout > 0 and body.cell_timeout < left
        answer = await cell.step(source, body.cell_timeout if per_cell else left)
        if answer is None:
            book.ended = "the client went away"
            return book
        obs, done = answer
        status = obs.get("status")
        if status in _OUT_OF_TIME or (status in ("timeout", "step_hung") and not per_cell):
            book.timed_out = True
            return book
        if done:
            book.ended = f"{status}: {obs.get('reason', '')}".rstrip(": ")
            book.cells.append(CellRunResult(error=[{"ename": str(status), "evalue": str(obs.get("reason", "")),
                                                    "traceback": []}]))
            book.cells += [_not_run(str(status))] * (len(body.cells) - len(book.cells))
            return book
        book.cells.append(_cell(obs, status == "timeout"))
    return book


async def _fetch(cell: _Cell, names: list[str], asked: list[str], deadline: float, budget: int,
                 notes: list[str]) -> dict[str, str]:
    """The work-dir files asked for, read by the session's interpreter after the last cell (regular files only, as
    UTF-8 text as /run_code returns them), base64, under the names the client asked by. As /run_code's: each at most
    ``_FETCH_BYTES``, all together at most ``budget`` (the run's output limit); a file over either is left out and
    ``notes`` says so. A file comes in chunks, each a cell whose output fits any output limit."""
    out: dict[str, str] = {}
    nonce = secrets.token_hex(8)
    for name, shown in zip(names, asked):
        data = b""
        while len(data) < _FETCH_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                notes.append(f"{shown} was not fetched: the total timeout was reached")
                return out
            code = (f"import os as _o, stat as _s, base64 as _b\n"
                    f"_p = {name!r}\n"
                    "if _o.path.lexists(_p) and _s.S_ISREG(_o.lstat(_p).st_mode):\n"
                    "    with open(_p, 'rb') as _f:\n"
                    f"        _t = _f.read({_FETCH_BYTES * 4 + 1}).decode('utf-8', 'replace').encode()\n"
                    f"    _c = _t[{len(data)}:{len(data) + _FETCH_CHUNK}]\n"
                    f"    print({nonce!r}, len(_t), _b.b64encode(_c).decode())\n"
                    "    del _f, _t, _c\n"
                    "del _o, _s, _b, _p")
            answer = await cell.step(code, min(10.0, left))
            if answer is None:
                return out
            obs, done = answer
            if obs.get("truncated"):
                notes.append(f"{shown} was not fetched: the cells' output limit is too small to carry it")
                break
            words = str(obs.get("stdout") or "").rstrip("\n").split(" ")
            if done or obs.get("status") != "ok" or len(words) != 3 or words[0] != nonce or not words[1].isdigit():
                break  # absent, not a regular file, or the interpreter failed at it
            size = int(words[1])
            if size > _FETCH_BYTES or size > budget:
                notes.append(f"{shown} was not fetched: its {size} bytes are over " + (
                    f"a fetched file's limit of {_FETCH_BYTES}" if size > _FETCH_BYTES else
                    f"what is left of the fetched files' limit ({budget} bytes)"))
                break
            try:
                data += base64.b64decode(words[2], validate=True)
            except ValueError:
                break
            if len(data) >= size:
                out[shown] = base64.b64encode(data[:size]).decode("ascii")
                budget -= size
                break
    return out


@router.post("/run_jupyter", response_model=RunJupyterResponse)
async def run_jupyter(body: RunJupyterRequest, settings: SettingsDep, gate: AdmissionDep,
                      request: Request) -> RunJupyterResponse:
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
    for i, source in enumerate(body.cells):
        if len(source) > MAX_CODE_CHARS:
            raise ApiError(422, f"cell {i} holds {len(source)} characters, over a python session step's limit of "
                                f"{MAX_CODE_CHARS}", loc=["cells", i])
    size = len(json.dumps(body.cells)) + sum(len(v) for v in files.values())
    if size > settings.sandbox.max_input_chars:
        raise ApiError(413, f"cells + files hold {size} characters, over the limit of "
                            f"{settings.sandbox.max_input_chars}")
    # the session's limits hold for its life: the request's memory, the server's defaults for the rest, its CPU
    # seconds the total timeout, and each cell's output the run's output limit
    limits = {"memory_mb": memory, "disk_mb": defaults.disk_mb, "processes": defaults.processes,
              "cpu_s": min(total, caps.cpu_s), "output_bytes": defaults.output_bytes, "wall_s": total + 2 * _SETUP_S}
    try:
        manager = await get_manager(request)
    except EnvError as exc:
        return RunJupyterResponse(status=ApiStatus.SANDBOX_ERROR, message=str(exc), executor_pod_name=pod())
    resources = EnvResources(sandbox=backend, python_limits=limits, python_network="loopback")
    started = time.monotonic()
    session: Session | None = None
    try:
        with gate.admit(1):
            session, _ = await manager.create("python", {"files": files}, client_of(request), resources)
            cell = _Cell(manager, session, request)
            deadline = time.monotonic() + total
            book = await _run_cells(cell, body, deadline)
            fetched = {} if book.timed_out or book.ended else await _fetch(
                cell, fetched_names(body), body.fetch_files, deadline, defaults.output_bytes, notes)
    except Capacity as exc:
        raise ApiError(429, str(exc), headers={"Retry-After": str(exc.retry_after_s)}) from exc
    except InvalidRequest as exc:  # the session's own checks of the files
        raise ApiError(422, str(exc), loc=[str(exc.details.get("field", "files"))]) from exc
    except EnvError as exc:
        log.warning("/run_jupyter: the python session failed: %s", exc)
        return RunJupyterResponse(status=ApiStatus.SANDBOX_ERROR, message=f"sandbox failure: {exc}",
                                  executor_pod_name=pod())
    finally:
        if session is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(manager.finish(session, score=False))
    seconds = round(time.monotonic() - started, 6)
    if book.timed_out:
        driver = CommandRunResult(status=CommandStatus.TIME_LIMIT_EXCEEDED, execution_time=seconds)
        return RunJupyterResponse(status=ApiStatus.FAILED, driver=driver, executor_pod_name=pod(),
                                  message="; ".join([*notes, f"the cells ran past total_timeout={total:g}s"]))
    driver = CommandRunResult(status=CommandStatus.FINISHED, execution_time=seconds, return_code=0 if not book.ended
                              else 1)
    return RunJupyterResponse(status=ApiStatus.FAILED if book.ended else ApiStatus.SUCCESS,
                              message="; ".join([*notes, *([book.ended] if book.ended else [])]), driver=driver,
                              cells=book.cells, executor_pod_name=pod(), files=fetched)
