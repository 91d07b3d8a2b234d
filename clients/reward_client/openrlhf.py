"""OpenRLHF adapter: a file usable as ``--reward.remote_url /path/to/reward_client/openrlhf.py``.

OpenRLHF 0.11 can reach the service two ways. ``--reward.remote_url http://HOST:8000/openrlhf/reward`` needs no
code, but OpenRLHF's own HTTP client tries 5 times a second apart and then leaves the reward None, so a restart of
the service costs the samples scored meanwhile. Given this file instead, OpenRLHF calls ``reward_func(queries,
prompts, labels)`` once per sample from a thread; here those calls are coalesced into batched requests to the same
``/openrlhf/reward`` route and retried through an outage for ``REWARD_CLIENT_RETRY_BUDGET_S`` (300 s by default).
Settings come from the environment (``REWARD_CLIENT_URL``, ``REWARD_CLIENT_TOKEN``), since OpenRLHF passes none;
``REWARD_CLIENT_URL`` may list several instances separated by commas, which then share the work.

Multi-turn agents: OpenRLHF's ``MultiTurnAgentExecutor`` calls no reward function; the ``AgentInstance`` of the
user's ``--agent_func_path`` file returns the reward from its ``step``. ``TrajectoryReward`` is a mixin for that
class: it keeps the episode as chat messages (the prompt, each action as an assistant turn, what the environment
answered) and, when the episode is done, has the service score it as a trajectory.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from reward_client.client import AsyncRewardClient, shared_coalescer
from reward_client.errors import RequestRejected
from reward_client.items import VerifyItem
from reward_client.messages import openai_messages
from reward_client.protocol import ClientConfig
from reward_client.retry import trainer_policy

PATH = "/openrlhf/reward"


async def _send(client: AsyncRewardClient, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One route call for many samples, answered per sample (each list in the response sliced to its entry)."""
    body = {"query": [s["query"] for s in samples], "prompts": [s["prompt"] for s in samples],
            "labels": [s["label"] for s in samples]}
    answer = await client.request_json("POST", PATH, body)
    n = len(samples)
    rewards = answer.get("rewards") if isinstance(answer, dict) else None
    if not isinstance(rewards, list) or len(rewards) != n:
        raise RequestRejected(200, f"expected {n} rewards, got {answer!r:.200}", None, PATH)
    scores = answer.get("scores") if isinstance(answer.get("scores"), list) else rewards
    logs = answer.get("extra_logs") if isinstance(answer.get("extra_logs"), dict) else {}
    return [
        {"reward": rewards[i], "score": scores[i],
         "logs": {k: v[i] if isinstance(v, list) and len(v) == n else v for k, v in logs.items()}}
        for i in range(n)
    ]


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None,
                **_: Any) -> dict[str, Any]:
    """OpenRLHF's custom reward entry: the route's answer shape (``rewards``, ``scores``, ``extra_logs``)."""
    labels = list(labels) if labels is not None else [None] * len(queries)
    samples = [{"query": q, "prompt": p, "label": lab} for q, p, lab in zip(queries, prompts, labels)]
    parts = shared_coalescer(ClientConfig(retry=trainer_policy())).run("openrlhf", samples, _send)
    keys = sorted({k for part in parts for k in part["logs"]})
    return {
        "rewards": [part["reward"] for part in parts],
        "scores": [part["score"] for part in parts],
        "extra_logs": {k: [part["logs"].get(k, 0.0) for part in parts] for k in keys},
    }


class Reward(float):
    """A reward OpenRLHF reads with ``.item()`` (it expects a tensor), without the client importing torch."""

    def item(self) -> float:
        return float(self)


class TrajectoryReward:
    """Mixin for an OpenRLHF ``AgentInstance`` scored by the service on the whole episode::

        class AgentInstance(TrajectoryReward, AgentInstanceBase):
            verifier = "math"

            async def environment(self, action_text, label):
                result = run_tool(action_text)  # the environment's own work
                return [{"role": "user", "content": result}], result, is_final(action_text)

        class AgentExecutor(MultiTurnAgentExecutor):
            def __init__(self):
                super().__init__(AgentInstance)

    Intermediate steps get reward 0; the step that ends the episode gets the trajectory's score (text verifiers score
    the final assistant turn, judges read it all). A null verdict is ``REWARD_CLIENT_NULL_SCORE`` (0.0) with
    ``scored`` 0 in ``extra_logs``.
    """

    verifier: ClassVar[str] = "math"
    options: ClassVar[dict[str, Any]] = {}
    tools: ClassVar[list[dict[str, Any]] | None] = None  # the OpenAI tool specs the model is given

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.messages: list[dict[str, Any]] = []

    def prompt_messages(self, observation: str) -> list[dict[str, Any]]:
        """The episode's opening messages from OpenRLHF's prompt text (already chat-templated); override to give
        the structured prompt."""
        return [{"role": "user", "content": observation}]

    def assistant_message(self, action_text: str) -> dict[str, Any]:
        """One action as an assistant turn; override to parse its tool calls into ``tool_calls``."""
        return {"role": "assistant", "content": action_text}

    async def environment(self, action_text: str, label: Any) -> tuple[list[dict[str, Any]], str, bool]:
        """The environment's answer to an action: messages to add (tool results, a user turn), the feedback text
        the model sees next, and whether the episode is done. The default ends the episode after one action."""
        return [], "", True

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.messages = self.prompt_messages(states["observation"])
        return {"observation": states["observation"]}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.messages.append(self.assistant_message(states["action_text"]))
        added, feedback, done = await self.environment(states["action_text"], states.get("label"))
        self.messages.extend(added)
        reward, logs = 0.0, {}
        if done:
            item = VerifyItem(self.verifier, reference=states.get("label"), options=dict(self.options),
                              messages=openai_messages(self.messages), tools=self.tools)
            [result] = await shared_coalescer(ClientConfig(retry=trainer_policy())).averify([item])
            null = float(os.environ.get("REWARD_CLIENT_NULL_SCORE") or 0.0)
            reward = result.score if result.score is not None else null
            logs = {"scored": float(result.score is not None)}
        return {"rewards": Reward(reward), "scores": Reward(reward), "environment_feedback": feedback, "done": done,
                "extra_logs": logs}
