"""verl adapter for environments: a tool for verl 0.9's ``ToolAgentLoop`` and the reward that ends the episode.

    # tools.yaml, given as actor_rollout_ref.rollout.multi_turn.tool_config_path
    tools:
      - class_name: reward_client.verl_tool.EnvironmentTool
        config: {type: native, env: python, url: "http://127.0.0.1:8000"}
        # tool_schema may be left out: the environment's /schema gives it (config "tool" picks one of several)

The agent loop calls ``create``, ``execute`` and ``release`` around every single tool call, and has no hook at the
end of a trajectory, so the session is keyed on the trajectory (``agent_data.request_id``): the first call of a
trajectory opens it (``reset`` with the row's ``tools_kwargs.<tool>.create_kwargs``: ``reward`` ``{verifier,
reference, options}``, ``seed``, task fields), later calls of the same trajectory step it, and calls issued in one
turn run one after the other. Where it lives goes into ``agent_data.extra_fields["reward_service_env"]`` (and the
conversation into ``extra_fields["messages"]``), which verl hands the reward function as ``extra_info``; then
``reward_client.verl``'s ``compute_score``/``compute_score_async`` submit the final turn as the final answer, which
scores and ends the episode, and close the session. A session whose reward call never comes (a run stopped) is
reaped by the server's TTL.

An infrastructure failure (``SessionLost``, ``InfraError``) is told to the model as the tool's answer and recorded
in ``extra_fields``; the reward function reports it as a null verdict (``scored`` False, ``status`` its code, the
score ``REWARD_CLIENT_NULL_SCORE``), since verl needs a number: filter on ``scored`` to mask it.
"""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

from reward_client.environments import AsyncEnvClient, EnvClient, Session, loop_client, observation_text
from reward_client.errors import EpisodeFailed, InfraError, RequestRejected, ServiceUnavailable
from reward_client.retry import trainer_policy

_Base: Any = object
try:  # verl's own base class when verl is installed (the client itself needs only httpx)
    from verl.tools.base_tool import BaseTool

    _Base = BaseTool
except ImportError:  # pragma: no cover - verl absent: the class still imports
    pass

FIELD = "reward_service_env"

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
    """One tool of an environment session. Config: ``env`` (the environment, default python), ``tool`` (which of
    its tools, default its first; the schema comes from the server's ``/envs/{env}/schema`` unless the tool config
    gives ``tool_schema``), ``url`` (several with commas or a list; else ``REWARD_CLIENT_URL``), ``token``,
    ``step_timeout_s``. A call's arguments are the action (the environments' tools map one to one)."""

    def __init__(self, config: dict[str, Any], tool_schema: Any = None) -> None:
        self.config = dict(config)
        self.env = str(self.config.get("env") or "python")
        self.url = self.config.get("url")
        self.token = self.config.get("token")
        self.step_timeout_s = self.config.get("step_timeout_s")
        self._kwargs: dict[str, dict[str, Any]] = {}
        if tool_schema is None:
            tool_schema = _verl_schema(self._served_schema())
        if _Base is object:
            self.tool_schema = tool_schema
            self.name = tool_schema.function.name
        else:
            super().__init__(self.config, tool_schema)

    def _served_schema(self) -> dict[str, Any]:
        """The OpenAI function schema of the configured tool, from the environment's own ``/schema``."""
        with EnvClient(self.url, token=self.token, retry=trainer_policy()) as client:
            tools = client.schema(self.env).get("tools") or []
        wanted = self.config.get("tool")
        named = [t for t in tools if isinstance(t, dict) and (t.get("name") == wanted if wanted
                                                               else t.get("name") != "final_answer")]
        if not named:
            raise ValueError(f"environment {self.env!r} has no tool {wanted!r}; it has "
                             f"{[t.get('name') for t in tools if isinstance(t, dict)]}")
        tool = named[0]
        return {"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                                 "parameters": tool.get("inputSchema") or {"type": "object"}}}

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
            client = loop_client(self.url, self.token)
            sessions = agent_data.extra_fields.setdefault(FIELD, {})
            # the loop appends every later turn to this very list, so the reward sees the final answer's turn
            agent_data.extra_fields.setdefault("messages", agent_data.messages)
            session = _live(agent_data).get(self.env)
            try:
                if session is None:  # a bad task (RequestRejected) propagates: it is the dataset's, not the policy's
                    session = await self._open(client, create_kwargs, agent_data)
                    _live(agent_data)[self.env] = session
                if session.failure is not None:
                    raise session.failure
                step = await client.step(session, dict(parameters), self.step_timeout_s)
                text, ok = observation_text(step.observation), 1.0
            except RequestRejected as exc:  # the policy's call was malformed (a wrong argument, a finished episode)
                if session is None:
                    raise
                text, ok = f"error: {exc.message}", 1.0
            except EpisodeFailed as exc:
                text, ok = f"error: {exc.code}: {exc.message}", 0.0
                session = session or Session(self.env, "", "")
                session.fail(exc)
                _live(agent_data)[self.env] = session
            sessions[self.env] = record(session)
        return _response(text), 0.0, {"reward_service_env_ok": ok}

    async def _open(self, client: AsyncEnvClient, create_kwargs: Mapping[str, Any], agent_data: Any) -> Session:
        """A new session for the trajectory (the prompt's last user turn as the task's ``prompt`` where the
        environment takes one and the row gave none); a service that stayed unreachable through the retry budget
        voids the episode like a lost session (the reward function then masks it)."""
        kwargs = _reset_kwargs(create_kwargs)
        try:
            if "prompt" not in kwargs and "prompt" in await client.task_fields(self.env):
                prompt = _last_user_text(getattr(agent_data, "messages", []))
                if prompt:
                    kwargs["prompt"] = prompt
            return await client.reset(self.env, **kwargs)
        except ServiceUnavailable as exc:
            raise InfraError(f"no session could be opened: {exc}") from exc

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0  # the episode is scored once, by the reward function, on the final answer

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._kwargs.pop(instance_id, None)


def _reset_kwargs(create_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in create_kwargs.items() if v is not None}
    if "seed" in out and not isinstance(out["seed"], int):
        out.pop("seed")
    return out


def _last_user_text(messages: Any) -> str:
    for message in reversed(list(messages or [])):
        if isinstance(message, Mapping) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


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
    client = loop_client(session.url, token)
    try:
        step = None
        if not session.done:
            try:
                step = await client.step(session, {"final_answer": answer})
            except RequestRejected:  # the episode ended on its own meanwhile (its interpreter died): its verdict
                step = None
        if step is not None and step.done:
            reward, verdict = step.reward, step.verdict or {}
            await client.discard(session)
        else:
            closed = await client.close(session, score=True)
            reward = closed.reward if closed is not None else None
            verdict = (closed.verdict if closed is not None else None) or {}
    except EpisodeFailed as exc:
        return None, exc.code, exc.message
    status = str(verdict.get("status") or ("ok" if reward is not None else "null"))
    return reward, status, str(verdict.get("reason") or "")
