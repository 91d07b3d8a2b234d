"""OpenRLHF 0.11's real MultiTurnAgentExecutor, loaded from reward_client/openrlhf_agent.py the way
``--train.agent_func_path`` loads it, driving environment sessions on the real server: tool calls step the session,
the final turn is scored by it, a lost session ends the episode unscored."""
from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest

agent = pytest.importorskip("openrlhf.utils.agent")

import reward_client.openrlhf_agent as shipped  # noqa: E402

from tests.support.reward_models import build_tokenizer  # noqa: E402
from tests.support.server import LiveServer  # noqa: E402
from tests.support.trainer_openrlhf import PROMPT, ScriptedEngine  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    return build_tokenizer(tmp_path_factory.mktemp("openrlhf_env") / "tokenizer", chat=True)


@pytest.fixture()
def url(env_server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("REWARD_CLIENT_URL", env_server.url)  # what the agent file reads (OpenRLHF passes nothing)
    monkeypatch.setenv("REWARD_CLIENT_ENV", "python")
    monkeypatch.setenv("REWARD_CLIENT_ENV_VERIFIER", "exact_match")
    yield env_server.url


def load_like_openrlhf():
    """openrlhf.trainer.ray.vllm_engine._load_agent_executor: spec_from_file_location, then AgentExecutor()."""
    spec = importlib.util.spec_from_file_location("agent_module", shipped.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, agent.AgentExecutorBase)
    return module.AgentExecutor()


def call(name: str, **arguments: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


class LosingAgent(shipped.EnvironmentAgent):
    """An episode whose label says ``lose`` has its session closed behind the client's back after reset, as a
    reaper or a restarted instance would: its next step meets the server's ``session_lost``."""

    async def reset(self, states, **kwargs):
        label = json.loads(states["label"])
        lose = label.pop("lose", False)
        out = await super().reset({**states, "label": json.dumps(label)})
        if lose:
            async with httpx.AsyncClient() as http:
                closed = await http.post(f"{self.session.url}/envs/python/close",
                                         json={"session_id": self.session.session_id})
                closed.raise_for_status()
        return out


def test_agent_file_drives_sessions_and_scores_the_final_turn(url: str, tokenizer) -> None:
    executor = load_like_openrlhf()
    params = SimpleNamespace(max_tokens=64, logprobs=None)
    episodes = [
        ([call("run_code", code="x = 6 * 7"), call("run_code", code="print(x)"), "42"], "42"),
        ([call("run_code", code="x = 1"), call("final_answer", answer="41")], "42"),
        ([call("run_code", code="print("), "no idea"], json.dumps({"reference": "42", "prompt": "What is 6*7?"})),
    ]

    async def run_all() -> list[dict]:
        return await asyncio.gather(*(executor.execute(PROMPT, label, params, 1024, tokenizer,
                                                       ScriptedEngine(tokenizer, actions))
                                      for actions, label in episodes))

    outs = asyncio.run(run_all())
    assert [o["reward"] for o in outs] == [1.0, 0.0, 0.0]  # the second answered 41 through the tool
    assert [o["extra_logs"] for o in outs] == [{"scored": 1.0, "env_failed": 0.0}] * 3
    assert [len(o["action_ranges"]) for o in outs] == [3, 2, 2]
    decoded = tokenizer.decode(outs[0]["observation_tokens"])
    assert "<tool_response>\n(no output)\n</tool_response>" in decoded
    assert "<tool_response>\nstdout:\n42\n\n</tool_response>" in decoded  # the session's answer, fed back
    assert "SyntaxError" in tokenizer.decode(outs[2]["observation_tokens"])  # the policy's error, told to it


def test_a_lost_session_ends_the_episode_unscored(url: str, tokenizer) -> None:
    executor = agent.MultiTurnAgentExecutor(LosingAgent)
    params = SimpleNamespace(max_tokens=64, logprobs=None)
    episodes = [([call("run_code", code="print(1)"), "42"], {"reference": "42", "lose": True}),
                ([call("run_code", code="print(1)"), "42"], {"reference": "42"})]

    async def run_all() -> list[dict]:
        return await asyncio.gather(*(executor.execute(PROMPT, json.dumps(label), params, 1024, tokenizer,
                                                       ScriptedEngine(tokenizer, actions))
                                      for actions, label in episodes))

    lost, kept = asyncio.run(run_all())
    assert (lost["reward"], lost["extra_logs"]) == (0.0, {"scored": 0.0, "env_failed": 1.0})
    assert len(lost["action_ranges"]) == 1  # ended at the failure, not played on
    assert (kept["reward"], kept["extra_logs"]) == (1.0, {"scored": 1.0, "env_failed": 0.0})
