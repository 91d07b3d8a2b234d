"""OpenRLHF 0.11's real MultiTurnAgentExecutor, loaded from reward_client/openrlhf_agent.py the way
``--train.agent_func_path`` loads it, driving environment sessions: tool calls step the session, the final turn is
scored by it, an infra failure ends the episode unscored."""
from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

agent = pytest.importorskip("openrlhf.utils.agent")

import reward_client.openrlhf_agent as shipped  # noqa: E402

from tests.clients.test_trainer_openrlhf import PROMPT, ScriptedEngine  # noqa: E402
from tests.support.env_double import calls, env_double  # noqa: E402
from tests.support.reward_models import build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    return build_tokenizer(tmp_path_factory.mktemp("openrlhf_env") / "tokenizer", chat=True)


@pytest.fixture()
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with env_double("o") as (base, _):
        monkeypatch.setenv("REWARD_CLIENT_URL", base)
        monkeypatch.setenv("REWARD_CLIENT_ENV", "python")
        monkeypatch.setenv("REWARD_CLIENT_ENV_VERIFIER", "exact_match")
        yield base


def load_like_openrlhf():
    """openrlhf.trainer.ray.vllm_engine._load_agent_executor: spec_from_file_location, then AgentExecutor()."""
    spec = importlib.util.spec_from_file_location("agent_module", shipped.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, agent.AgentExecutorBase)
    return module.AgentExecutor()


def call(name: str, **arguments: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def test_agent_file_drives_sessions_and_scores_the_final_turn(url: str, tokenizer) -> None:
    executor = load_like_openrlhf()
    params = SimpleNamespace(max_tokens=64, logprobs=None)
    episodes = [
        ([call("python", code="x = 6 * 7"), call("python", code="print(x)"), "42"], "42"),
        ([call("python", code="x = 1"), call("final_answer", answer="41")], "42"),
        ([call("python", code="print(2)"), "42"], json.dumps({"reference": "42", "infra": True})),
    ]

    async def run_all() -> list[dict]:
        return await asyncio.gather(*(executor.execute(PROMPT, label, params, 1024, tokenizer,
                                                       ScriptedEngine(tokenizer, actions))
                                      for actions, label in episodes))

    outs = asyncio.run(run_all())
    assert [o["reward"] for o in outs] == [1.0, 0.0, 0.0]
    assert [o["extra_logs"] for o in outs] == [{"scored": 1.0, "env_failed": 0.0}, {"scored": 1.0, "env_failed": 0.0},
                                               {"scored": 0.0, "env_failed": 1.0}]
    assert [len(o["action_ranges"]) for o in outs] == [3, 2, 1]
    log = calls(url)
    by_session: dict[str, list] = {}
    for c in log:
        by_session.setdefault(c["session_id"], []).append(c)
    steps = sorted([[c.get("action") for c in s if c["call"] == "step"] for s in by_session.values()], key=str)
    assert [{"code": "x = 6 * 7"}, {"code": "print(x)"}, {"final_answer": "42"}] in steps
    assert [{"code": "x = 1"}, {"final_answer": "41"}] in steps
    decoded = tokenizer.decode(outs[0]["observation_tokens"])
    assert "<tool_response>\nstdout:\n42\n\n</tool_response>" in decoded  # the session's answer, fed back
    resets = [c["body"] for c in log if c["call"] == "reset"]
    assert {"reward": {"verifier": "exact_match", "reference": "42"}, "infra": True} in resets
