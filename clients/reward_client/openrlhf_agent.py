"""OpenRLHF adapter for environments: a file usable as ``--train.agent_func_path`` (OpenRLHF 0.11).

    python -m openrlhf.cli.train_ppo_ray ... --train.agent_func_path $(python -c \\
        "import reward_client.openrlhf_agent as m; print(m.__file__)")
    REWARD_CLIENT_URL=http://127.0.0.1:8000  REWARD_CLIENT_ENV=python

OpenRLHF loads ``AgentExecutor`` from the file and runs one ``AgentInstance`` per prompt: ``reset`` opens a session
of the environment (``REWARD_CLIENT_ENV``, default python) with the episode's reward spec taken from the label, and
each ``step`` reads the model's action: a tool call (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
the Hermes/Qwen format) steps the session and the observation goes back as a tool turn; a turn with no tool call,
or a call of ``final_answer``, is the final answer, which ends the episode with its reward.

The label (``--data.label_key``) is the reference, or a JSON object: ``{"reward": {verifier, reference, options},
...task fields}`` or ``{"verifier", "reference", "options", ...task fields}``; the verifier defaults to
``REWARD_CLIENT_ENV_VERIFIER`` (math). OpenRLHF needs a number for every step and has no way to mask an episode, so
an infrastructure failure (``SessionLost``, ``InfraError``) ends it with ``REWARD_CLIENT_NULL_SCORE`` (0.0) and
``extra_logs`` ``scored`` 0 and ``env_failed`` 1: filter on them. Subclass ``EnvironmentAgent`` (and point
``AgentExecutor`` at it) to change the tool-call format or the feedback's chat template.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from reward_client.environments import AsyncEnvClient, Session, loop_client, observation_text
from reward_client.errors import EpisodeFailed, InfraError, RequestRejected, ServiceUnavailable
from reward_client.openrlhf import Reward

_InstanceBase: Any = object
_Executor: Any = object
try:  # OpenRLHF's base classes: its loader checks them (the client itself needs only httpx)
    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

    _InstanceBase, _Executor = AgentInstanceBase, MultiTurnAgentExecutor
except ImportError:  # pragma: no cover - OpenRLHF absent: the classes still import
    pass

ENV_ENV = "REWARD_CLIENT_ENV"
VERIFIER_ENV = "REWARD_CLIENT_ENV_VERIFIER"
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def tool_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The (name, arguments) of each well-formed Hermes tool call in ``text``; a malformed one is skipped (the
    model's output is scored, never rejected)."""
    calls = []
    for block in TOOL_CALL.findall(text):
        try:
            call = json.loads(block)
        except ValueError:
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            continue
        arguments = call.get("arguments", call.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {}
        calls.append((call["name"], arguments if isinstance(arguments, dict) else {}))
    return calls


def episode_of(label: Any, verifier: str) -> dict[str, Any]:
    """reset's keyword arguments from an OpenRLHF label (see the module docstring)."""
    data: Any = label
    if isinstance(label, str):
        try:
            data = json.loads(label)
        except ValueError:
            data = label
    if not isinstance(data, Mapping):
        return {"reward": {"verifier": verifier, "reference": label}}
    data = dict(data)
    if isinstance(data.get("reward"), Mapping):
        return data
    spec = {"verifier": data.pop("verifier", verifier)}
    for key in ("reference", "options"):
        if key in data:
            spec[key] = data.pop(key)
    return {**data, "reward": spec}


class EnvironmentAgent(_InstanceBase):
    """One episode of an environment session, driven by OpenRLHF's ``MultiTurnAgentExecutor``."""

    env = ""  # empty: REWARD_CLIENT_ENV, else python

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.env_name = self.env or os.environ.get(ENV_ENV) or "python"
        self.session: Session | None = None
        self.failure: EpisodeFailed | None = None

    def client(self) -> AsyncEnvClient:
        return loop_client(os.environ.get("REWARD_CLIENT_URL"), os.environ.get("REWARD_CLIENT_TOKEN"))

    def feedback(self, text: str) -> str:
        """The tool result as the next turn of the conversation, in the Qwen chat template; override for another."""
        return (f"<|im_end|>\n<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n")

    def action_of(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The action a tool call stands for: its arguments (the environments' tools map one to one)."""
        return dict(arguments)

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        verifier = os.environ.get(VERIFIER_ENV) or "math"
        try:
            self.session = await self.client().reset(self.env_name, **episode_of(states.get("label"), verifier))
        except ServiceUnavailable as exc:
            self.failure = InfraError(f"no session could be opened: {exc}")
        return {"observation": states["observation"]}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        action_text = str(states.get("action_text") or "")
        calls = tool_calls(action_text)
        answer = next((a for n, a in calls if n == "final_answer"), None)
        try:
            if self.failure is not None:
                raise self.failure
            assert self.session is not None
            if calls and answer is None:
                texts = []
                for name, arguments in calls:
                    try:
                        step = await self.client().step(self.session, self.action_of(name, arguments))
                    except RequestRejected as exc:  # the policy's malformed call: told, not fatal
                        texts.append(f"error: {exc.message}")
                        continue
                    if step.done:  # the environment ended the episode itself (its interpreter died): scored
                        await self.client().discard(self.session)
                        return self._result(step.reward, "", True, scored=float(step.reward is not None))
                    texts.append(observation_text(step.observation))
                return self._result(0.0, self.feedback("\n".join(texts)), False, scored=1.0)
            final = answer.get("answer", "") if answer is not None else action_text
            try:
                step = await self.client().step(self.session, {"final_answer": final if isinstance(final, str)
                                                               else json.dumps(final)})
                reward = step.reward if step.done else None
                done = step.done
            except RequestRejected:
                done = False
            if not done:
                closed = await self.client().close(self.session, score=True)
                reward = closed.reward if closed is not None else None
            await self.client().discard(self.session)
        except EpisodeFailed as exc:
            self.failure = exc
            return self._result(None, "", True, scored=0.0)
        return self._result(reward, "", True, scored=float(reward is not None))

    def _result(self, reward: float | None, feedback: str, done: bool, scored: float) -> dict[str, Any]:
        value = reward if reward is not None else float(os.environ.get("REWARD_CLIENT_NULL_SCORE") or 0.0)
        return {"rewards": Reward(value), "scores": Reward(value), "environment_feedback": feedback, "done": done,
                "extra_logs": {"scored": scored, "env_failed": float(self.failure is not None)}}


class AgentExecutor(_Executor):
    """What OpenRLHF's ``--train.agent_func_path`` loads: its multi-turn executor over ``EnvironmentAgent``."""

    agent_class: type = EnvironmentAgent

    def __init__(self) -> None:
        if _Executor is not object:
            super().__init__(self.agent_class)


__all__ = ["AgentExecutor", "EnvironmentAgent", "episode_of", "tool_calls"]
