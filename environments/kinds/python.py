"""``python``: a persistent Python interpreter per session, in a sandbox of its own (``Backend.open_session``).

An action is a cell (``{"code": ...}``, as OpenEnv's coding environment names it); variables, imports and the work
dir's files persist across steps. The observation is the cell's stdout, stderr (each capped), the last expression's
repr, the exception, and ``status``: ``ok``, ``error`` (the cell raised), ``timeout`` (interrupted at the step's time
limit; the interpreter recovered and the session goes on), or, when the interpreter is gone, the name of why
(``step_hung``, ``memory_exceeded``, ``cpu_exceeded``, ``exited``, ``protocol_error``, ``lifetime_exceeded``): the
episode is then done, and scored like any other end. A sandbox failure is an ``infra_error``, never an observation.
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from environments.base import Environment, EnvResources, Step, Task, Tool
from environments.errors import InfraError, InvalidRequest, SessionLost
from sandbox.api import CellResult, Limits, SandboxSession, SessionEnded, SessionSpec
from sandbox.paths import files_problem

MAX_CODE_CHARS = 200_000


MAX_FILES_CHARS = 8_000_000


class PythonTask(Task):
    files: dict[str, str] = Field(default_factory=dict, description="Files written to the work dir at reset "
                                  "(relative paths; 8 MB in all at most).")
    setup_code: str | None = Field(None, max_length=MAX_CODE_CHARS, description="A first cell run at reset "
                                   "(its observation is reset's); not part of the transcript.")
    prompt: str | None = Field(None, description="The task as the user's message (opens the transcript).")


class PythonAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(..., max_length=MAX_CODE_CHARS, description="A cell: statements, and optionally a trailing "
                      "expression whose value is returned.")


class PythonObservation(BaseModel):
    status: str = Field(description="ok | error | timeout, or why the interpreter ended (the episode is then done)")
    stdout: str = ""
    stderr: str = ""
    value: str | None = Field(None, description="repr of the cell's trailing expression")
    exception: dict[str, str] | None = Field(None, description="type, message, traceback of what the cell raised")
    truncated: bool = False
    wall_ms: float = 0.0
    session_id: str = ""


RUN_CODE = Tool("run_code", "Run Python code in this session's persistent interpreter (variables, imports and files "
                "persist). Returns stdout, stderr, the value of a trailing expression and any exception.",
                {"type": "object", "properties": {"code": {"type": "string", "description": "Python code to run."}},
                 "required": ["code"], "additionalProperties": False})


def observation(cell: CellResult) -> dict[str, Any]:
    return {"status": cell.status, "stdout": cell.stdout, "stderr": cell.stderr, "value": cell.value,
            "exception": cell.exception, "truncated": cell.truncated, "wall_ms": cell.wall_ms}


def transcript_text(obs: dict[str, Any]) -> str:
    """A step's result as a tool message reads it: what a notebook shows."""
    parts = [obs.get("stdout") or "", obs.get("stderr") or ""]
    exc = obs.get("exception")
    if exc:
        parts.append(exc.get("traceback") or f"{exc.get('type')}: {exc.get('message')}")
    if obs.get("value") is not None:
        parts.append(str(obs["value"]))
    if obs.get("status") not in ("ok", "error"):
        parts.append(f"[{obs.get('status')}] {obs.get('reason', '')}".strip())
    return "\n".join(p for p in parts if p)


class PythonEnvironment(Environment):
    name = "python"
    description = ("A persistent Python interpreter per session, inside the service's sandbox: no network unless "
                   "the server allows it, seccomp, memory, disk, process and CPU limits for the session's life.")
    task_model = PythonTask
    action_model = PythonAction
    observation_model = PythonObservation
    tools = (RUN_CODE,)

    def __init__(self, resources: EnvResources) -> None:
        super().__init__(resources)
        self._session: SandboxSession | None = None
        self._ended: SessionEnded | None = None

    def _spec(self) -> SessionSpec:
        spec = SessionSpec(network=self.resources.python_network)
        known = {f.name for f in fields(Limits)}
        overrides = {k: v for k, v in self.resources.python_limits.items() if k in known}
        return replace(spec, limits=replace(spec.limits, **overrides))

    async def reset(self, task: Task, seed: int | None) -> dict[str, Any]:
        assert isinstance(task, PythonTask)
        problem = files_problem(list(task.files)) or (
            "the files hold more than 8 MB" if sum(map(len, task.files.values())) > MAX_FILES_CHARS else "")
        if problem:
            raise InvalidRequest(problem, field="files")
        if self.resources.sandbox is None:
            raise InfraError("no sandbox is configured on this server")
        try:
            self._session = await self.resources.sandbox.open_session(self._spec())
        except SessionEnded as exc:
            raise InfraError(f"cannot open a python session: {exc.reason}") from exc
        setup = []
        if task.files:  # written by the interpreter itself: the files never pass through the host's disk
            setup.append(f"import os as _os\nfor _p, _t in {task.files!r}.items():\n"
                         "    _os.makedirs(_os.path.dirname(_p) or '.', exist_ok=True)\n"
                         "    with open(_p, 'w') as _f:\n        _f.write(_t)\ndel _os, _p, _t, _f")
        if seed is not None:  # the episode's seed seeds the interpreter's random module
            setup.append(f"import random as _r\n_r.seed({int(seed)})\ndel _r")
        if setup:
            cell = await self._cell("\n".join(setup), 30.0)
            if cell.status != "ok":
                raise InvalidRequest(f"the task's files could not be written: {cell.exception}", field="files")
        if task.setup_code:
            step = await self.step(PythonAction(code=task.setup_code), 30.0)
            return step.observation
        return {"status": "ok", "stdout": "", "stderr": "", "value": None, "exception": None, "truncated": False,
                "wall_ms": 0.0}

    async def _cell(self, code: str, timeout_s: float) -> CellResult:
        if self._session is None:
            raise SessionLost("the session has no interpreter")
        return await self._session.exec(code, timeout_s)

    async def step(self, action: BaseModel, timeout_s: float) -> Step:
        assert isinstance(action, PythonAction)
        try:
            cell = await self._cell(action.code, timeout_s)
        except SessionEnded as exc:
            if exc.infra:
                raise InfraError(f"the session's sandbox failed: {exc.reason}") from exc
            self._ended = exc
            obs = {"status": exc.status, "reason": exc.reason, "stdout": "", "stderr": "", "value": None,
                   "exception": None, "truncated": False, "wall_ms": 0.0}
            return Step(obs, done=True, transcript_text=transcript_text(obs), status=exc.status)
        obs = observation(cell)
        return Step(obs, transcript_text=transcript_text(obs), status=cell.status)

    def state(self) -> dict[str, Any]:
        alive = self._session is not None and self._session.alive
        return {"interpreter": "alive" if alive else (self._ended.status if self._ended else "closed")}

    def usage(self) -> dict[str, int]:
        return self._session.usage() if self._session is not None else {}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


ENVIRONMENTS = [PythonEnvironment]
