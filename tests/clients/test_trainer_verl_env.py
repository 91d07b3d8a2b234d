"""verl 0.9's real ToolAgentLoop with reward_client.verl_tool.EnvironmentTool loaded from a tool config by verl's own
loader, then verl's reward loop scoring the trajectories through reward_client.verl: sessions keyed on the
trajectory, the final answer scored by the session, an infra failure a null verdict. Generation is vLLM's job, so the
LLM server manager returns scripted token ids; everything around it (parsing tool calls, calling the tool, building
the next turn, the reward loop) is verl's code."""
from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

verl = pytest.importorskip("verl")
pytest.importorskip("verl.experimental.agent_loop.tool_agent_loop")
hydra = pytest.importorskip("hydra")

import numpy as np  # noqa: E402
import reward_client.verl as shipped  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.experimental.reward_loop import reward_loop  # noqa: E402
from verl.tools.tool_registry import load_all_tools  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from tests.support.scripted_policy import build_scripted_policy  # noqa: E402
from tests.support.server import LiveServer, run_env_server  # noqa: E402
from tests.support.trainer_verl import rollouts, run, verl_config  # noqa: E402


def call(name: str, **arguments: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


TURNS = [call("run_code", code="x = 6 * 7") + "\n" + call("run_code", code="print(x)") + "<|im_end|>",
         call("run_code", code="print(x + 0)") + "<|im_end|>",
         "42<|im_end|>"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_scripted_policy(tmp_path_factory.mktemp("verl_env") / "policy", ["unused piece"])


@pytest.fixture()
def two(tmp_path: Path) -> Iterator[list[LiveServer]]:
    with run_env_server(tmp_path / "a") as a, run_env_server(tmp_path / "b") as b:
        yield [a, b]


class ScriptedServer:
    """Stands in for verl's LLM server manager: each trajectory (request_id) gets the scripted turns in order.
    ``before_turn(k, n)`` (a coroutine) runs before a turn ``k`` is generated, ``n`` the trajectories that have
    reached it."""

    def __init__(self, tokenizer, before_turn=None) -> None:
        self.tokenizer = tokenizer
        self.turn: dict[str, int] = {}
        self.before_turn = before_turn
        self.reached: dict[int, int] = {}

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        k = self.turn.get(request_id, 0)
        self.turn[request_id] = k + 1
        self.reached[k] = self.reached.get(k, 0) + 1
        if self.before_turn is not None:
            await self.before_turn(k, self.reached[k])
        ids = self.tokenizer.encode(TURNS[min(k, len(TURNS) - 1)], add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=None, stop_reason="completed")


def config(model_dir: Path, tools_yaml: Path):
    return verl_config([
        f"actor_rollout_ref.model.path={model_dir}",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tools_yaml}",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=5",
        "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=2",
        "actor_rollout_ref.rollout.prompt_length=2048",
        "actor_rollout_ref.rollout.response_length=2048",
        f"reward.custom_reward_function.path={shipped.__file__}",
        "reward.custom_reward_function.name=compute_score_async",
    ])


def agent_outputs(cfg, model_dir: Path, create_kwargs: list[dict], before_turn=None) -> list:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tools = load_all_tools(tool_config_path=cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path,
                           function_tool_path=None)
    server = ScriptedServer(tokenizer, before_turn)

    async def one(kwargs: dict):
        loop = hydra.utils.instantiate(
            config=_agent_loop_registry["tool_agent"], trainer_config=DictConfigWrap(config=cfg),
            server_manager=server, tokenizer=tokenizer, processor=None, hf_model_type=None,
            dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data), tools=ToolListWrap(tools))
        return await loop.run({}, raw_prompt=[{"role": "user", "content": "What is 6 times 7?"}],
                              tools_kwargs={"run_code": {"create_kwargs": kwargs}}, extra_info={})

    async def all_of() -> list:
        return await asyncio.gather(*(one(k) for k in create_kwargs))

    return asyncio.run(all_of())


def test_tool_agent_loop_keeps_one_session_per_trajectory_and_the_reward_loop_scores_it(
        model_dir: Path, two: list[LiveServer], tmp_path: Path) -> None:
    """Four trajectories over two instances; the second instance is SIGKILLed after the first turn's tool calls, so
    the trajectories it held lose their sessions: their reward is a null verdict, the others' the session's."""
    a, b = two
    tools_yaml = tmp_path / "tools.yaml"
    tools_yaml.write_text(json.dumps({"tools": [{
        "class_name": "reward_client.verl_tool.EnvironmentTool",
        "config": {"type": "native", "env": "python", "url": f"{a.url},{b.url}"}}]}))  # JSON is YAML
    cfg = config(model_dir, tools_yaml)
    references = ["42", "41", "42", "41"]
    kwargs = [{"reward": {"verifier": "exact_match", "reference": r}} for r in references]

    all_there: list[asyncio.Event] = []

    async def kill_b(turn: int, reached: int) -> None:
        """Turn 1 waits until every trajectory has made its first turn's calls; then b dies."""
        if turn != 1:
            return
        if not all_there:
            all_there.append(asyncio.Event())
        if reached == 4:
            os.kill(b.proc.pid, signal.SIGKILL)
            b.proc.wait(timeout=30)
            all_there[0].set()
        await all_there[0].wait()

    outputs = agent_outputs(cfg, model_dir, kwargs, kill_b)
    entries = [o.extra_fields["reward_service_env"]["python"] for o in outputs]
    on_a = [i for i, e in enumerate(entries) if e["url"] == a.url]
    on_b = [i for i, e in enumerate(entries) if e["url"] == b.url]
    assert len(on_a) == 2 and len(on_b) == 2  # spread over both instances
    assert [entries[i]["failure"] for i in on_a] == [None, None]
    assert [entries[i]["failure"] for i in on_b] == ["session_lost", "session_lost"]
    tool_turns = [m["content"] for m in outputs[on_a[0]].extra_fields["messages"] if m["role"] == "tool"]
    assert tool_turns == ["(no output)", "stdout:\n42\n", "stdout:\n42\n"]  # two turns, one interpreter
    lost_turns = [m["content"] for m in outputs[on_b[0]].extra_fields["messages"] if m["role"] == "tool"]
    assert lost_turns[:2] == ["(no output)", "stdout:\n42\n"] and lost_turns[2].startswith("error: session_lost")
    assert outputs[on_a[0]].extra_fields["messages"][-1] == {"role": "assistant", "content": "42<|im_end|>"}

    worker = reward_loop.RewardLoopWorker(cfg)
    data = rollouts(model_dir, ["42"] * 4, ["unused"] * 4, [{"index": i} for i in range(4)])
    data.non_tensor_batch["tool_extra_fields"] = np.array([o.extra_fields for o in outputs], dtype=object)
    outs = run(worker, data)
    extra = [o["reward_extra_info"] for o in outs]
    for i in on_a:  # the final answer "42", scored by the session against its reference
        assert (outs[i]["reward_score"], extra[i]["scored"]) == (1.0 if references[i] == "42" else 0.0, True)
    for i in on_b:  # masked by `scored`, not a wrong answer
        assert (outs[i]["reward_score"], extra[i]["scored"], extra[i]["status"]) == (0.0, False, "session_lost")
    with httpx.Client(base_url=a.url) as http:  # the reward call ended the episodes: their sessions are closed
        for i in on_a:
            answer = http.get("/envs/python/state", params={"session_id": entries[i]["session_id"]})
            assert answer.status_code == 410 and answer.json()["code"] == "session_lost"
