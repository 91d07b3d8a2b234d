"""``bfcl``: a BFCL multi-turn task as a live episode (``verifiers.kinds.bfcl``: BFCL's own simulated APIs from
bfcl-eval, driven by parsed calls, never ``eval``).

Reset takes a task (``task_id`` of the installed bfcl-eval data, or the task itself; none: a multi_turn_base task
drawn by the seed, so OpenEnv's bare reset works). Each observation that opens a
turn carries the turn's user message and the function docs offered in it (BFCL's own, less those miss_func withholds
until a later turn). A step is one assistant message: structured ``tool_calls`` (one call or several parallel ones)
or its text, read by the ``tool_calls`` parser; its calls run on the session's instances and the observation holds
their results as BFCL's executor returns them. The turn ends on ``end_turn`` (after the step's calls, if any), on a
message without calls, on a message whose calls cannot be read (as BFCL's inference loop moves on), or at BFCL's step
limit; the turn is then judged by BFCL's checks against the ground truth replayed on a second set of instances, and
the next turn opens. After the last turn the episode is done and its reward is BFCL's verdict (1 only when every
turn passes; ``partial``: the fraction of turns passed), with ``turn_scores`` per turn.

The instances live in a worker process of their own per session (``verifiers.kinds.bfcl.worker``), capped in memory;
a step past its time limit kills it, the episode is rebuilt in a new one by replaying its earlier requests, and the
step's calls count as failed calls that changed nothing. Workers are started ahead (``EnvResources.bfcl_warm_workers``,
``environments.warm``): a reset takes one already waiting, so it costs loading the task, not a process start.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from environments.base import Environment, EnvResources, Step, Task, Tool
from environments.errors import InfraError, InvalidRequest
from environments.warm import WarmProcesses
from sandbox.spawn import kill_and_wait, start_process
from verifiers.kinds.bfcl.source import INSTALL_HINT, available, task_from_dict, task_ids
from verifiers.kinds.bfcl.source import Task as LoadedTask
from verifiers.types import VerifierError

WORKER_MEMORY_MB = 1024
START_TIMEOUT_S = 60.0
MAX_LINE_BYTES = 64 * 1024 * 1024
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"


class BfclTask(Task):
    task_id: str | None = Field(None, description="A multi-turn task of the installed bfcl-eval data "
                                                  "(multi_turn_base_12, multi_turn_miss_func_3, ...).")
    id: str | None = Field(None, description="The inline task's id (its category decides long_context).")
    initial_config: dict[str, Any] | None = None
    involved_classes: list[str] | None = None
    question: list[list[dict[str, Any]]] | None = None
    ground_truth: list[list[str]] | None = None
    missed_function: dict[str, list[Any]] | None = None
    long_context: bool | None = None
    partial: bool = Field(False, description="Reward the fraction of turns passed instead of all-or-nothing.")
    irrelevance: bool = Field(False, description="Fail a turn without ground-truth calls where the model calls.")
    max_chars: int = Field(200_000, ge=1, le=2_000_000, description="Longest assistant text read for calls.")

    def reference(self, seed: int | None = None) -> dict[str, Any]:
        """The task as the verifier's reference; with no task at all (OpenEnv's bare reset), a multi_turn_base task
        drawn by the seed (the first without one)."""
        if self.task_id is not None:
            return {"task_id": self.task_id}
        if self.involved_classes is None and self.ground_truth is None:
            ids = task_ids("multi_turn_base")
            return {"task_id": ids[(seed or 0) % len(ids)]}
        fields = ("id", "initial_config", "involved_classes", "question", "ground_truth", "missed_function",
                  "long_context")
        return {k: getattr(self, k) for k in fields if getattr(self, k) is not None}


class BfclAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool_calls: list[Any] | None = Field(None, description="OpenAI tool_calls ({id, type, function: {name, "
                                                           "arguments}}) or {name, arguments} objects.")
    content: Any = Field(None, description="The assistant message's text: call text (Hermes <tool_call> blocks, "
                                           "JSON, Python call syntax) or a message to the user.")
    end_turn: bool = Field(False, description="End the user's turn (after this step's calls, if any).")


class BfclObservation(BaseModel):
    status: str = Field(description="turn_started, results, turn_ended (the next turn's messages follow), "
                                    "unreadable (the calls could not be read: the turn ended), done")
    turn: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list, description="the user message(s) of a new turn")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="function docs offered in this turn")
    added_functions: list[str] = Field(default_factory=list)
    results: list[dict[str, Any]] = Field(default_factory=list, description="[{name, result}] of this step's calls")
    error: str | None = None
    turn_result: dict[str, Any] | None = None
    turn_scores: list[float] = Field(default_factory=list)
    task_id: str | None = Field(None, description="the task reset loaded (one drawn by the seed when none is named)")
    session_id: str = ""


CALL_FUNCTIONS = Tool(
    "call_functions", "Call one or more of the offered functions (several run in order as parallel calls).",
    {"type": "object", "properties": {"tool_calls": {"type": "array", "items": {
        "type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
        "required": ["name"]}}}, "required": ["tool_calls"]})
END_TURN = Tool("end_turn", "End your turn: answer the user without calling a function.",
                {"type": "object", "properties": {"message": {"type": "string"}}})


def as_tool(doc: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function doc in OpenAI's tool shape (BFCL's "dict" parameters are JSON schema's "object")."""
    params = json.loads(json.dumps(doc.get("parameters", {})).replace('"type": "dict"', '"type": "object"')
                        .replace('"type": "float"', '"type": "number"')
                        .replace('"type": "tuple"', '"type": "array"'))
    return {"type": "function", "function": {"name": doc["name"], "description": doc.get("description", ""),
                                             "parameters": params}}


class _WorkerEnded(Exception):
    """The worker's output ended: it exited or was killed (not by us)."""


async def spawn_worker() -> asyncio.subprocess.Process:
    """A worker process that has said it is ready (its imports done); killed again if that fails or is cancelled."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [*sys.path, os.environ.get("PYTHONPATH")]))}
    proc = await start_process(sys.executable, "-m", "verifiers.kinds.bfcl.worker", str(WORKER_MEMORY_MB),
                               stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                               stderr=asyncio.subprocess.DEVNULL, env=env, start_new_session=True,
                               limit=MAX_LINE_BYTES)
    try:
        assert proc.stdout is not None
        if not await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT_S):
            raise _WorkerEnded("the bfcl worker process ended before it was ready")
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            await kill_and_wait(proc)
        raise
    return proc


def _waiting_alive(proc: asyncio.subprocess.Process) -> bool:
    return proc.returncode is None and proc.stdout is not None and not proc.stdout.at_eof()


def worker_pool(resources: EnvResources) -> WarmProcesses[asyncio.subprocess.Process] | None:
    """The service's pool of ready workers, made at the first reset that asks (none when the size is 0)."""
    if resources.bfcl_warm_workers <= 0:
        return None
    pool = resources.pools.get("bfcl")
    if pool is None:
        pool = resources.pools["bfcl"] = WarmProcesses(spawn_worker, _waiting_alive, kill_and_wait,
                                                  resources.bfcl_warm_workers)
    return pool


class _Worker:
    """One session's worker process and the requests that built its state (replayed into a new one when a step's
    deadline kills it)."""

    def __init__(self, pool: WarmProcesses[asyncio.subprocess.Process] | None = None) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.log: list[dict[str, Any]] = []
        self.pool = pool
        self.warm = False  # whether the process came from the pool, already started

    async def start(self) -> None:
        proc = await self.pool.take() if self.pool is not None else None
        self.warm = proc is not None
        self.proc = proc if proc is not None else await spawn_worker()

    async def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout_s)
        if not line:
            raise _WorkerEnded("the bfcl worker process ended")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def _send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        await self.proc.stdin.drain()
        return await self._read(timeout_s)

    async def request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | str:
        """The worker's answer, or why it gave none: the request ran past ``timeout_s``, or the worker ended while
        running it. The worker is then replaced and the earlier requests replayed; the request is not."""
        try:
            answer = await self._send(request, timeout_s)
        except TimeoutError:
            await self.restart()
            return f"the call ran past the step's time limit of {timeout_s:g}s"
        except (_WorkerEnded, ConnectionError) as exc:
            await self.restart()
            return f"the call ended the process it ran in ({type(exc).__name__})"
        except ValueError as exc:
            raise InfraError(f"the bfcl worker answered what is not JSON: {exc}") from exc
        self.log.append(request)
        return answer

    async def restart(self) -> None:
        await self.close()
        await self.start()
        try:
            for request in self.log:
                await self._send(request, START_TIMEOUT_S)
        except (TimeoutError, _WorkerEnded, ConnectionError, ValueError) as exc:
            raise InfraError(f"the bfcl episode could not be rebuilt: {exc}") from exc

    async def close(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            with contextlib.suppress(ProcessLookupError):
                await kill_and_wait(proc)


class BfclEnvironment(Environment):
    name = "bfcl"
    description = ("BFCL multi-turn function calling: BFCL's simulated APIs (file system, messaging, posting, "
                   "tickets, trading, travel, vehicle, math) from bfcl-eval, turn by turn; rewarded by BFCL's own "
                   "multi-turn checks.")
    task_model = BfclTask
    action_model = BfclAction
    observation_model = BfclObservation
    tools = (CALL_FUNCTIONS, END_TURN)

    def __init__(self, resources: EnvResources) -> None:
        super().__init__(resources)
        self._worker = _Worker(worker_pool(resources))
        self._task: BfclTask | None = None
        self._loaded: LoadedTask | None = None
        self._turn = 0
        self._n_turns = 0
        self._scores: list[float] = []
        self._done = False

    async def reset(self, task: Task, seed: int | None) -> dict[str, Any]:
        assert isinstance(task, BfclTask)
        if not available():
            raise InfraError(INSTALL_HINT)
        try:
            reference = task.reference(seed)
            loaded = task_from_dict(reference)
        except VerifierError as exc:
            raise InvalidRequest(f"the task cannot be loaded: {exc}", field="task_id" if task.task_id else
                                 "ground_truth") from exc
        self._task, self._loaded = task, loaded
        await self._worker.start()
        opening = {"op": "reset", "task": reference, "irrelevance": task.irrelevance}
        answer = await self._worker.request(opening, START_TIMEOUT_S)
        if isinstance(answer, str) and self._worker.warm:  # it died waiting unnoticed: the restart began afresh
            answer = await self._worker.request(opening, START_TIMEOUT_S)
        if isinstance(answer, str) or "error" in answer:
            why = answer if isinstance(answer, str) else answer["error"]
            raise InfraError(f"the bfcl worker could not load the task: {why}")
        self._n_turns = int(answer["turns"])
        return {**self._opening(0, "turn_started"), "task_id": loaded.id}

    def _opening(self, turn: int, status: str) -> dict[str, Any]:
        assert self._loaded is not None
        messages = [dict(m) for m in self._loaded.question[turn]] or [
            {"role": "user", "content": ADDED_FUNCTIONS_PROMPT}]
        return {"status": status, "turn": turn, "messages": messages,
                "tools": [as_tool(d) for d in self._loaded.functions(turn)],
                "added_functions": self._loaded.added_functions(turn), "turn_scores": list(self._scores)}

    async def step(self, action: BaseModel, timeout_s: float) -> Step:
        assert isinstance(action, BfclAction) and self._task is not None
        if self._done:
            raise InvalidRequest("the episode is done; reset to start another", field="action")
        has_content = bool(action.content) if not isinstance(action.content, str) else bool(action.content.strip())
        if not action.tool_calls and not has_content:
            return await self._end_turn({"status": "turn_ended", "results": []})
        request = {"op": "step", "tool_calls": action.tool_calls, "content": action.content,
                   "max_chars": self._task.max_chars}
        answer = await self._worker.request(request, timeout_s)
        if isinstance(answer, str):  # past its time limit, or it ended its worker: the calls failed, changed nothing
            calls = [str((c.get("function") or c).get("name", ""))[:200] if isinstance(c, dict) else ""
                     for c in action.tool_calls or []] or ["(call text)"]
            results = [f"Error during execution: {answer}"] * len(calls)
            recorded = await self._worker.request({"op": "record", "results": results}, START_TIMEOUT_S)
            if isinstance(recorded, str):
                raise InfraError(f"the bfcl worker could not record a failed step: {recorded}")
            answer = {"runs": True, "results": results, "calls": calls, "error": None,
                      "step_limit_reached": bool(recorded.get("step_limit_reached"))}
        if "results" not in answer:
            raise InfraError(f"the bfcl worker answered {str(answer)[:200]}")
        obs: dict[str, Any] = {"status": "results", "turn": self._turn, "error": answer.get("error"),
               "results": [{"name": n, "result": r} for n, r in zip(answer.get("calls", []), answer["results"])]}
        if answer.get("error"):
            obs["status"] = "unreadable"  # BFCL's inference moves to the next turn on a step it cannot decode
            return await self._end_turn(obs)
        if not answer.get("runs") or answer.get("step_limit_reached") or action.end_turn:
            obs["status"] = "turn_ended"
            return await self._end_turn(obs)
        return Step(obs, transcript_text=_results_text(obs["results"]), status="results")

    async def _end_turn(self, obs: dict[str, Any]) -> Step:
        assert self._task is not None
        answer = await self._worker.request({"op": "end_turn"}, START_TIMEOUT_S)
        if isinstance(answer, str) or "turn" not in answer:
            raise InfraError(f"the bfcl worker did not judge the turn: {str(answer)[:200]}")
        self._scores = [float(s) for s in answer["turn_scores"]]
        obs.update(turn_result=answer["turn"], turn_scores=list(self._scores))
        text = _results_text(obs.get("results", []))
        if answer["done"]:
            self._done = True
            scores = self._scores + [0.0] * (self._n_turns - len(self._scores))
            reward = sum(scores) / len(scores) if self._task.partial else float(bool(answer["passed"]))
            obs.update(status="done", turn_scores=scores, error_type=answer.get("error_type"),
                       turns=answer.get("turns"))
            return Step(obs, reward=reward, done=True, transcript_text=text, status="done")
        self._turn += 1
        opening = self._opening(self._turn, str(obs["status"]))
        obs.update({k: v for k, v in opening.items() if k not in ("status", "turn_scores")}, turn=self._turn)
        return Step(obs, transcript_text=text, status=str(obs["status"]))

    def action_of(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool == END_TURN.name:
            return {"end_turn": True}
        return {"tool_calls": arguments.get("tool_calls")}

    def tool_of(self, action: BaseModel) -> str:
        return CALL_FUNCTIONS.name if getattr(action, "tool_calls", None) or getattr(action, "content", None) \
            else END_TURN.name

    def state(self) -> dict[str, Any]:
        return {"turn": self._turn, "turns": self._n_turns, "turn_scores": list(self._scores), "done": self._done,
                "worker": "alive" if self._worker.proc is not None else "closed",
                "worker_start": "warm" if self._worker.warm else "on demand"}

    async def close(self) -> None:
        await self._worker.close()


def _results_text(results: list[dict[str, Any]]) -> str:
    return "\n".join(f"{r['name']}: {r['result']}" for r in results)


ENVIRONMENTS = [BfclEnvironment]
