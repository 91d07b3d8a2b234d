"""verl adapter for environments: a tool for verl 0.9's ``ToolAgentLoop`` and the reward that ends the episode.

    # tools.yaml, given as actor_rollout_ref.rollout.multi_turn.tool_config_path
    tools:
      - class_name: reward_client.verl_tool.EnvironmentTool
        config: {type: native, env: python, action: code, url: "http://127.0.0.1:8000"}
        # tool_schema may be left out for the python and sql environments (see SCHEMAS)

The agent loop calls ``create``, ``execute`` and ``release`` around every single tool call, and has no hook at the
end of a trajectory, so the session is keyed on the trajectory (``agent_data.request_id``): the first call of a
trajectory opens it (``reset`` with the row's ``tools_kwargs.<tool>.create_kwargs``: ``reward`` ``{verifier,
reference, options}``, ``seed``, task fields), later calls of the same trajectory step it, and calls issued in one
turn run one after the other. Where it lives goes into ``agent_data.extra_fields["reward_service_env"]`` (and the
conversation into ``extra_fields["messages"]``), which verl hands the reward function as ``extra_info``; ``reward_client.verl``'s ``compute_score``/``compute_score_async`` then
submit the response as the final answer, which scores and ends the episode, and close the session. A session whose
reward call never comes (a run stopped) is reaped by the server's TTL.

An infrastructure failure (``SessionLost``, ``InfraError``) is told to the model as the tool's answer and recorded
in ``extra_fields``; the reward function reports it as a null verdict (``scored`` False, ``status`` its code, the
score ``REWARD_CLIENT_NULL_SCORE``), since verl needs a number: filter on ``scored`` to mask it.
"""
from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from reward_client.environments import AsyncEnvClient, Session, observation_text
from reward_client.errors import EpisodeFailed, InfraError, ServiceUnavailable
from reward_client.protocol import join_urls
from reward_client.retry import trainer_policy

_Base: Any = object
try:  # verl's own base class when verl is installed (the client itself needs only httpx)
    from verl.tools.base_tool import BaseTool

    _Base = BaseTool
except ImportError:  # pragma: no cover - verl absent: the class still imports
    pass

FIELD = "reward_service_env"

# OpenAI function schemas of the environments' tools, for a tool config that gives none
SCHEMAS: dict[str, dict[str, Any]] = {
    "python": {"type": "function", "function": {
        "name": "python",
        "description": "Run Python code in a persistent interpreter; variables, imports and files persist between "
                       "calls. Print what you want to see.",
        "parameters": {"type": "object", "properties": {
            "code": {"type": "string", "description": "The Python source to run."}}, "required": ["code"]}}},
    "sql": {"type": "function", "function": {
        "name": "sql",
        "description": "Run one read-only SQL query against the task's database.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "The SQL query to run."}}, "required": ["query"]}}},
}
ACTIONS = {"python": "code", "sql": "query"}  # the action field each environment's tool fills

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str | None], AsyncEnvClient]] = (
    weakref.WeakKeyDictionary())


def env_client(url: str | Sequence[str] | None, token: str | None = None) -> AsyncEnvClient:
    """One async client per event loop and settings (an httpx async client belongs to one loop; a loop's clients
    go with it)."""
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (join_urls(url), token)
    if key not in per_loop:
        per_loop[key] = AsyncEnvClient(key[0] or None, token=token, retry=trainer_policy())
    return per_loop[key]


def record(session: Session) -> dict[str, Any]:
    """What the reward function needs of a session (plain data: it travels through verl's batch)."""
    failure = session.failure
    return {"env": session.env, "session_id": session.session_id, "url": session.url, "done": session.done,
            "failure": failure.code if failure is not None else None,
            "failure_message": failure.message if failure is not None else None}


def session_of(entry: Mapping[str, Any]) -> Session:
    session = Session(str(entry["env"]), str(entry["session_id"]), str(entry["url"]), done=bool(entry.get("done")))
    return session


class EnvironmentTool(_Base):
    """One tool of an environment session. Config: ``env`` (the environment), ``action`` (the action field the
    tool's single argument fills; a tool of several arguments sends them as the action), ``url`` (several with
    commas or a list; else ``REWARD_CLIENT_URL``), ``token``, ``step_timeout_s``."""

    def __init__(self, config: dict[str, Any], tool_schema: Any = None) -> None:
        self.config = dict(config)
        self.env = str(self.config.get("env") or "python")
        self.action_field = self.config.get("action") or ACTIONS.get(self.env)
        self.url = self.config.get("url")
        self.token = self.config.get("token")
        self.step_timeout_s = self.config.get("step_timeout_s")
        self._kwargs: dict[str, dict[str, Any]] = {}
        if tool_schema is None:
            tool_schema = _verl_schema(self.config.get("tool_schema") or SCHEMAS[self.env])
        if _Base is object:
            self.tool_schema = tool_schema
            self.name = tool_schema.function.name
        else:
            super().__init__(self.config, tool_schema)

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        instance_id = instance_id or uuid.uuid4().hex
        self._kwargs[instance_id] = dict(kwargs.get("create_kwargs") or {})
        return instance_id, _response("")

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float, dict]:
        agent_data = kwargs.get("agent_data")
        if agent_data is None:
            raise TypeError("EnvironmentTool needs verl's agent_data (the ToolAgentLoop passes it)")
        create_kwargs = self._kwargs.get(instance_id, {})
        lock = _lock_of(agent_data)
        async with lock:  # one trajectory's calls, even those of one turn, reach its session in order
            client = env_client(self.url, self.token)
            sessions = agent_data.extra_fields.setdefault(FIELD, {})
            # the loop appends every later turn to this very list, so the reward sees the final answer's turn
            agent_data.extra_fields.setdefault("messages", agent_data.messages)
            try:
                entry = sessions.get(self.env)
                if entry is None:
                    session = await self._open(client, create_kwargs)
                    _live(agent_data)[self.env] = session
                else:
                    session = _live(agent_data).get(self.env) or session_of(entry)
                if session.failure is not None:
                    raise session.failure
                step = await client.step(session, self._action(parameters), self.step_timeout_s)
                text = observation_text(step.observation)
                metrics = {"reward_service_env_ok": 1.0}
            except EpisodeFailed as exc:
                text = f"error: {exc.code}: {exc.message}"
                metrics = {"reward_service_env_ok": 0.0}
                session = _live(agent_data).get(self.env) or Session(self.env, "", "", failure=exc)
                session.fail(exc)
            sessions[self.env] = record(session)
        return _response(text), 0.0, metrics

    async def _open(self, client: AsyncEnvClient, create_kwargs: Mapping[str, Any]) -> Session:
        """A new session for the trajectory; a service that stayed unreachable through the retry budget voids the
        episode like a lost session (the reward function then masks it)."""
        try:
            return await client.reset(self.env, **_reset_kwargs(create_kwargs))
        except ServiceUnavailable as exc:
            raise InfraError(f"no session could be opened: {exc}") from exc

    def _action(self, parameters: Mapping[str, Any]) -> dict[str, Any]:
        if self.action_field and len(parameters) <= 1:
            value = next(iter(parameters.values()), "")
            return {self.action_field: value if isinstance(value, str) else str(value)}
        return dict(parameters)

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0  # the episode is scored once, by the reward function, on the final answer

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._kwargs.pop(instance_id, None)


def _reset_kwargs(create_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in create_kwargs.items() if v is not None}
    if "seed" in out and not isinstance(out["seed"], int):
        out.pop("seed")
    return out


def _lock_of(agent_data: Any) -> asyncio.Lock:
    lock = getattr(agent_data, "_reward_service_lock", None)
    if lock is None:
        lock = asyncio.Lock()
        agent_data._reward_service_lock = lock
    return lock


def _live(agent_data: Any) -> dict[str, Session]:
    """The trajectory's session objects (with their failure state), kept on the agent data, which ends with it."""
    live = getattr(agent_data, "_reward_service_sessions", None)
    if live is None:
        live = {}
        agent_data._reward_service_sessions = live
    return live


def _verl_schema(schema: Mapping[str, Any]) -> Any:
    from verl.tools.schemas import OpenAIFunctionToolSchema

    return OpenAIFunctionToolSchema.model_validate(dict(schema))


def _response(text: str) -> Any:
    from verl.tools.schemas import ToolResponse

    return ToolResponse(text=text)


async def finish(entry: Mapping[str, Any], answer: str, token: str | None = None) -> tuple[float | None, str, str]:
    """Score a verl trajectory's session: submit ``answer`` as its final answer (which ends the episode with its
    reward), then close it. (reward or None, status, reason): None with the failure's code when the session failed
    during the rollout or now."""
    if entry.get("failure"):
        return None, str(entry["failure"]), str(entry.get("failure_message") or "")
    session = session_of(entry)
    client = env_client(session.url, token)
    try:
        step = await client.step(session, {"final_answer": answer})
        if step.done:
            reward = step.reward
            verdict = step.verdict or {}
        else:
            closed = await client.close(session, score=True)
            reward = closed.reward if closed is not None else None
            verdict = (closed.verdict if closed is not None else None) or {}
        await client.discard(session)
    except EpisodeFailed as exc:
        return None, exc.code, exc.message
    status = str(verdict.get("status") or ("ok" if reward is not None else "null"))
    return reward, status, str(verdict.get("reason") or "")
