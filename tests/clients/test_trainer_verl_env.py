"""verl 0.9's real ToolAgentLoop with reward_client.verl_tool.EnvironmentTool loaded from a tool config by verl's own
loader, then verl's reward loop scoring the trajectories through reward_client.verl: sessions keyed on the
trajectory, the final answer scored by the session, an infra failure a null verdict. Generation is vLLM's job, so the
LLM server manager returns scripted token ids; everything around it (parsing tool calls, calling the tool, building
the next turn, the reward loop) is verl's code."""
from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

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

from tests.clients.test_trainer_verl import rollouts, run, verl_config  # noqa: E402
from tests.support.env_double import calls, env_double  # noqa: E402
from tests.support.scripted_policy import build_scripted_policy  # noqa: E402


def call(name: str, **arguments: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


TURNS = [call("python", code="x = 6 * 7") + "\n" + call("python", code="print(x)") + "<|im_end|>",
         call("python", code="print(x + 0)") + "<|im_end|>",
         "42<|im_end|>"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_scripted_policy(tmp_path_factory.mktemp("verl_env") / "policy", ["unused piece"])


@pytest.fixture(scope="module")
def two() -> Iterator[list[str]]:
    with env_double("a") as (a, _), env_double("b") as (b, _):
        yield [a, b]


class ScriptedServer:
    """Stands in for verl's LLM server manager: each trajectory (request_id) gets the scripted turns in order."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.turn: dict[str, int] = {}

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        k = self.turn.get(request_id, 0)
        self.turn[request_id] = k + 1
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


def agent_outputs(cfg, model_dir: Path, create_kwargs: list[dict]) -> list:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tools = load_all_tools(tool_config_path=cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path,
                           function_tool_path=None)
    server = ScriptedServer(tokenizer)

    async def one(kwargs: dict):
        loop = hydra.utils.instantiate(
            config=_agent_loop_registry["tool_agent"], trainer_config=DictConfigWrap(config=cfg),
            server_manager=server, tokenizer=tokenizer, processor=None, hf_model_type=None,
            dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data), tools=ToolListWrap(tools))
        return await loop.run({}, raw_prompt=[{"role": "user", "content": "What is 6 times 7?"}],
                              tools_kwargs={"python": {"create_kwargs": kwargs}}, extra_info={})

    async def all_of() -> list:
        return await asyncio.gather(*(one(k) for k in create_kwargs))

    return asyncio.run(all_of())


def test_tool_agent_loop_keeps_one_session_per_trajectory_and_the_reward_loop_scores_it(
        model_dir: Path, two: list[str], tmp_path: Path) -> None:
    tools_yaml = tmp_path / "tools.yaml"
    tools_yaml.write_text(json.dumps({"tools": [{
        "class_name": "reward_client.verl_tool.EnvironmentTool",
        "config": {"type": "native", "env": "python", "url": ",".join(two)}}]}))  # JSON is YAML
    cfg = config(model_dir, tools_yaml)
    spec = {"verifier": "exact_match"}
    kwargs = [{"reward": {**spec, "reference": "42"}}, {"reward": {**spec, "reference": "41"}},
              {"reward": {**spec, "reference": "42"}, "infra": True}, {"reward": {**spec, "reference": "42"}}]
    outputs = agent_outputs(cfg, model_dir, kwargs)
    entries = [o.extra_fields["reward_service_env"]["python"] for o in outputs]
    assert [e["failure"] for e in entries] == [None, None, "infra_error", None]
    ok = [e for e in entries if e["failure"] is None]
    assert {e["url"] for e in ok} == set(two) and len({e["session_id"] for e in ok}) == 3
    tool_turns = [m["content"] for m in outputs[0].extra_fields["messages"] if m["role"] == "tool"]
    assert tool_turns == ["(no output)", "stdout:\n42\n", "stdout:\n42\n"]  # two turns, one interpreter
    for e in ok:  # every call of the trajectory, across turns and create/release pairs, reached one session
        stepped = [c for url in two for c in calls(url) if c.get("session_id") == e["session_id"]]
        assert [c["call"] for c in stepped] == ["reset", "step", "step", "step"]
        assert [c["action"]["code"] for c in stepped[1:]] == ["x = 6 * 7", "print(x)", "print(x + 0)"]
    assert "error: infra_error" in [m["content"] for m in outputs[2].extra_fields["messages"]
                                    if m["role"] == "tool"][0]

    worker = reward_loop.RewardLoopWorker(cfg)
    data = rollouts(model_dir, ["42"] * 4, ["unused"] * 4, [{"index": i} for i in range(4)])
    data.non_tensor_batch["tool_extra_fields"] = np.array([o.extra_fields for o in outputs], dtype=object)
    outs = run(worker, data)
    scores = [o["reward_score"] for o in outs]
    extra = [o["reward_extra_info"] for o in outs]
    assert scores == [1.0, 0.0, 0.0, 1.0], extra
    assert [e["scored"] for e in extra] == [True, True, False, True]
    assert extra[2]["status"] == "infra_error"  # masked by `scored`, not a wrong answer
    for e in ok:  # the reward call ended the episode: final answer, then the session closed
        mine = [c for url in two for c in calls(url) if c.get("session_id") == e["session_id"]]
        assert mine[-2]["action"] == {"final_answer": "42"} and mine[-1]["call"] == "close"
