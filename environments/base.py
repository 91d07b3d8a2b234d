"""What an environment is: a class with a name, its task fields (what ``reset`` takes beyond seed, episode_id and
the reward spec), its action and observation models, its tools, and one instance per session that resets, steps,
reports its state and closes. A new environment is one module in ``environments/kinds/`` exporting
``ENVIRONMENTS`` (registered in ``environments.registry.BUILTIN_MODULES``); the session layer, the wire (HTTP,
WebSocket, MCP), rewards, lifetimes and capacity are shared and need nothing of it.

Every action may instead be ``{"final_answer": ...}``: the session layer ends the episode there and scores it; an
environment never sees it.
"""
from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from environments.warm import WarmProcesses
from sandbox.api import Backend

FINAL_ANSWER = "final_answer"


class Task(BaseModel):
    """Reset's task fields an environment takes (a subclass adds its own). Unknown fields are refused, naming them,
    so a typo never silently runs a default task."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Tool:
    """An action as a tool (MCP ``tools/list``, trainer adapters): ``input_schema`` is the arguments' JSON schema; a
    call ``name(**arguments)`` is the action ``arguments`` (``action_of`` may map it otherwise)."""

    name: str
    description: str
    input_schema: dict[str, Any]


FINAL_ANSWER_TOOL = Tool(
    FINAL_ANSWER, "Give the final answer and end the episode; the reward, if the episode has one, comes back with it.",
    {"type": "object", "properties": {"answer": {"type": "string", "description": "The final answer."}},
     "required": ["answer"], "additionalProperties": False})


@dataclass
class Step:
    """What one action did: the observation (JSON), a per-step reward where the environment defines one, whether
    the environment itself ended the episode, and the text the transcript records as the tool's result."""

    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False
    transcript_text: str = ""
    status: str = "ok"  # the step's own outcome, as the observation names it


@dataclass
class EnvResources:
    """What the service hands environments: the sandbox backend, the sql verifier's databases, and limits."""

    sandbox: Backend | None = None
    sql_databases_dir: str = ""
    python_limits: dict[str, Any] = field(default_factory=dict)  # overrides of sandbox.api.SessionSpec's limits
    python_network: str = "none"
    sql_max_rows: int = 200
    bfcl_warm_workers: int = 0  # bfcl worker processes kept started ahead (the service's setting; 0: none)
    pools: dict[str, WarmProcesses[Any]] = field(default_factory=dict)  # the warm pools made so far, closed at shutdown

    async def close(self) -> None:
        """Close what the environments made on these resources (the warm pools' waiting processes)."""
        pools, self.pools = self.pools, {}
        await asyncio.gather(*(p.close() for p in pools.values()), return_exceptions=True)


class Environment(abc.ABC):
    """One session's environment. Subclasses set the class attributes and implement ``reset`` and ``step``."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    task_model: ClassVar[type[Task]] = Task
    action_model: ClassVar[type[BaseModel]]
    observation_model: ClassVar[type[BaseModel]]
    tools: ClassVar[tuple[Tool, ...]] = ()

    def __init__(self, resources: EnvResources) -> None:
        self.resources = resources

    @abc.abstractmethod
    async def reset(self, task: Task, seed: int | None) -> dict[str, Any]:
        """Start the episode; the first observation. Raises ``EnvError`` (``InfraError`` when a backend fails)."""

    @abc.abstractmethod
    async def step(self, action: BaseModel, timeout_s: float) -> Step:
        """One action (already validated against ``action_model``)."""

    def action_of(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The action a tool call stands for (the arguments themselves, by default)."""
        return arguments

    def tool_of(self, action: BaseModel) -> str:
        """The tool an action calls, as the transcript names it (the first tool, by default)."""
        return self.tools[0].name if self.tools else "step"

    def state(self) -> dict[str, Any]:
        """What the environment can say of itself beyond the session's own fields."""
        return {}

    def usage(self) -> dict[str, int]:
        return {}

    async def close(self) -> None:
        """Free what the session holds (idempotent)."""
        return None

    @classmethod
    def all_tools(cls) -> tuple[Tool, ...]:
        return (*cls.tools, FINAL_ANSWER_TOOL)
