"""OpenRLHF 0.11's real reward path (SingleTurnAgentExecutor.execute after generation) against our /openrlhf route:
its own HTTP client for ``--reward.remote_url http://...``, and its file loader for ``--reward.remote_url
/path/to/reward_client/openrlhf.py``.

OpenRLHF is installed with ``--no-deps`` (its full set wants deepspeed, vLLM and flash-attn); this path imports
aiohttp only. Generation is vLLM's job, so ``llm_engine`` here returns fixed token ids: everything after it
(decoding the query, calling the reward, reading rewards/scores/extra_logs) is OpenRLHF's code.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

agent = pytest.importorskip("openrlhf.utils.agent")

import reward_client.openrlhf as shipped  # noqa: E402

from tests.support.live_restart import Restarter  # noqa: E402
from tests.support.reward_models import build_tokenizer  # noqa: E402
from tests.support.server import LiveServer, requests_to  # noqa: E402
from tests.support.trainer_openrlhf import PROMPT, FixedEngine, ScriptedEngine  # noqa: E402

ENV = {"REWARD_SERVICE_OPENRLHF_VERIFIER": "exact_match", "REWARD_SERVICE_AUTH_TOKEN": "tok"}



@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    return build_tokenizer(tmp_path_factory.mktemp("openrlhf") / "tokenizer", chat=True)





async def execute_all(executor, tokenizer, responses: list[str], label: str) -> list[dict]:
    params = SimpleNamespace(max_tokens=64, logprobs=None)
    return await asyncio.gather(*(
        executor.execute(PROMPT, label, params, 256, tokenizer, FixedEngine(tokenizer, r)) for r in responses
    ))


def test_openrlhf_http_client_against_the_route(
    openrlhf_server: LiveServer,
    tokenizer,
) -> None:
    executor = agent.SingleTurnAgentExecutor(f"{openrlhf_server.url}/openrlhf/reward?token=tok")
    outs = asyncio.run(execute_all(executor, tokenizer, ["Paris<|im_end|>", "Lyon<|im_end|>"], "Paris"))
    assert [o["reward"] for o in outs] == [[1.0], [0.0]] and [o["scores"] for o in outs] == [[1.0], [0.0]]
    logs = outs[0]["extra_logs"]
    assert logs["status_ok"] == [1.0] and logs["scored"] == [1.0] and logs["prompt_found"] == [1.0]


@pytest.fixture()
def outage_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Restarter]:
    server = Restarter(tmp_path, ENV)
    monkeypatch.setenv("REWARD_CLIENT_URL", server.url)  # what the file path reads (OpenRLHF passes no settings)
    monkeypatch.setenv("REWARD_CLIENT_TOKEN", "tok")
    yield server
    server.stop()


def test_file_reward_func_rides_out_a_restart_where_the_http_client_gives_none(outage_server: Restarter,
                                                                               tokenizer) -> None:
    outage_server.start()
    by_http = agent.SingleTurnAgentExecutor(f"{outage_server.url}/openrlhf/reward?token=tok")
    by_file = agent.SingleTurnAgentExecutor(shipped.__file__)  # OpenRLHF loads reward_func from the .py path
    assert by_file.reward_func is not None
    responses = ["Paris<|im_end|>" if i % 2 else "Rome<|im_end|>" for i in range(24)]
    outage_server.stop()
    restart = threading.Timer(8.0, outage_server.start)  # longer than OpenRLHF's 5 tries a second apart
    restart.start()

    async def both() -> tuple:
        return await asyncio.gather(execute_all(by_http, tokenizer, responses[:2], "Paris"),
                                    execute_all(by_file, tokenizer, responses, "Paris"))

    http_outs, file_outs = asyncio.run(both())
    restart.join()
    assert [o["reward"] for o in http_outs] == [None, None]  # OpenRLHF's own client gave up: no reward
    assert [o["reward"] for o in file_outs] == [[1.0] if i % 2 else [0.0] for i in range(24)]
    assert all(o["extra_logs"]["status_ok"] == [1.0] for o in file_outs)
    assert requests_to(outage_server.url, "/openrlhf/reward") < 24  # per-sample calls shared requests





class CalculatorAgent(shipped.TrajectoryReward, agent.AgentInstanceBase):
    """An agent file's AgentInstance: actions calling the calculator get its result back as a tool turn."""

    verifier = "math"

    def assistant_message(self, action_text: str) -> dict:
        if "CALL " in action_text:  # "text CALL expr": the text, then a call of the calculator
            text, expr = action_text.split("CALL ", 1)
            return {"role": "assistant", "content": text.strip() or None, "tool_calls": [
                {"type": "function", "function": {"name": "calc", "arguments": {"expr": expr}}}]}
        return super().assistant_message(action_text)

    async def environment(self, action_text: str, label):
        if "CALL " in action_text:
            a, b = action_text.split("CALL ", 1)[1].split("*")  # the scripted actions multiply two integers
            result = str(int(a) * int(b))
            return [{"role": "tool", "name": "calc", "content": result}], f"\n{result}\n", False
        return [], "", True


def test_multi_turn_agent_episodes_are_scored_as_trajectories(server: LiveServer, tokenizer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenRLHF's real MultiTurnAgentExecutor runs the episodes; the last step's reward is the trajectory's score."""
    monkeypatch.setenv("REWARD_CLIENT_URL", server.url)
    executor = agent.MultiTurnAgentExecutor(CalculatorAgent)
    params = SimpleNamespace(max_tokens=64, logprobs=None)
    episodes = [["CALL 6*7", "The answer is \\boxed{42}."],  # the final turn is right
                ["It is \\boxed{42}; checking: CALL 6*7", "CALL 6*8", "So \\boxed{48}."]]  # 42 only early

    async def run_all() -> list[dict]:
        return await asyncio.gather(*(executor.execute(PROMPT, "42", params, 512, tokenizer,
                                                       ScriptedEngine(tokenizer, e)) for e in episodes))

    outs = asyncio.run(run_all())
    assert [o["reward"] for o in outs] == [1.0, 0.0]
    assert [o["extra_logs"] for o in outs] == [{"scored": 1.0}, {"scored": 1.0}]
    assert [len(o["action_ranges"]) for o in outs] == [2, 3]
