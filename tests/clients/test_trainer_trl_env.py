"""TRL's real GRPOTrainer with ``environment_factory`` and reward_client.trl_env's classes: a tiny policy on disk that
writes tool calls (tests/support/scripted_policy), TRL's own tool loop calling the environment's methods, and the
environment's reward, against instances speaking the environment routes' contract."""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from reward_client.errors import InfraError  # noqa: E402
from reward_client.trl_env import PythonEnvironment  # noqa: E402

from tests.support.env_double import calls, env_double  # noqa: E402
from tests.support.scripted_policy import build_scripted_policy  # noqa: E402


def call(name: str, **arguments: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


SCRIPT = [call("python", code="x = 6 * 7") + "\n", call("python", code="print(x)") + "\n",
          call("final_answer", answer="42")]


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_scripted_policy(tmp_path_factory.mktemp("trl_env") / "policy", SCRIPT)


@pytest.fixture(scope="module")
def two() -> Iterator[list[str]]:
    with env_double("a") as (a, _), env_double("b") as (b, _):
        yield [a, b]


def train(policy: Path, out: Path, rows: list[dict], factory) -> trl.GRPOTrainer:
    args = trl.GRPOConfig(
        output_dir=str(out), per_device_train_batch_size=4, num_generations=2, max_completion_length=160,
        max_steps=1, logging_steps=1, report_to="none", use_cpu=True, bf16=False, save_strategy="no",
        disable_tqdm=True, seed=0, max_tool_calling_iterations=1,
    )
    trainer = trl.GRPOTrainer(model=str(policy), args=args, train_dataset=datasets.Dataset.from_list(rows),
                              environment_factory=factory)
    trainer.train()
    return trainer


def sessions(urls: list[str]) -> dict[str, list[dict]]:
    """Each session's calls, from the instances' own logs."""
    out: dict[str, list[dict]] = {}
    for url in urls:
        for c in calls(url):
            out.setdefault(c["session_id"], []).append({**c, "url": url})
    return out


class ExactPython(PythonEnvironment):
    verifier = "exact_match"


def test_grpo_step_drives_python_sessions_and_takes_their_reward(policy: Path, two: list[str],
                                                                tmp_path: Path) -> None:
    rows = [{"prompt": [{"role": "user", "content": "What is 6 times 7?"}], "answer": "42"},
            {"prompt": [{"role": "user", "content": "What is 6 times 7, minus 1?"}], "answer": "41"}]
    trainer = train(policy, tmp_path, rows, partial(ExactPython, url=two))
    [log] = [h for h in trainer.state.log_history if "reward" in h]
    assert log["rewards/ExactPython/mean"] == pytest.approx(0.5)  # two rollouts of "42" right, two wrong
    assert log["tools/call_frequency"] > 0 and log["tools/failure_frequency"] == 0
    episodes = [s for s in sessions(two).values() if s[0]["call"] == "reset"]
    assert len(episodes) == 4 and {e[0]["url"] for e in episodes} == set(two)  # spread over both instances
    for episode in episodes:
        assert len({c["url"] for c in episode}) == 1  # every call of a session went to the instance holding it
        actions = [c["action"] for c in episode if c["call"] == "step"]
        assert actions == [{"code": "x = 6 * 7"}, {"code": "print(x)"}, {"final_answer": "42"}]
        assert episode[0]["body"]["reward"]["reference"] in ("42", "41")
        assert episode[-1]["call"] == "close" and not episode[-1]["score"]  # answered: closed unscored after
    completion = trainer._logs["completion"][-1]
    tool_turns = [m["content"] for m in completion if m.get("role") == "tool"]
    assert "stdout:\n42\n" in tool_turns  # the second call saw the first call's variable: one interpreter


class FlakyPython(PythonEnvironment):
    """Rows with ``infra`` set meet an infrastructure failure on their first step (the double's knob)."""

    verifier = "exact_match"
    task_columns = ("infra",)


def test_an_infra_failure_masks_the_rollout_instead_of_scoring_it_zero(policy: Path, two: list[str],
                                                                      tmp_path: Path) -> None:
    rows = [{"prompt": [{"role": "user", "content": "What is 6 times 7?"}], "answer": "42", "infra": True},
            {"prompt": [{"role": "user", "content": "What is 6 times 7?"}], "answer": "42", "infra": False}]
    trainer = train(policy, tmp_path, rows, partial(FlakyPython, url=two))
    [log] = [h for h in trainer.state.log_history if "reward" in h]
    pool = trainer._environment_pool[None]
    failed = [env for env in pool if env.failure is not None]
    assert len(failed) == 2 and all(isinstance(env.failure, InfraError) for env in failed)
    assert [env.get_reward() for env in failed] == [None, None]  # masked, not 0
    assert log["tools/failure_frequency"] > 0
    # TRL averages over the rollouts that were scored: the two good ones earned 1.0 each
    assert log["rewards/FlakyPython/mean"] == pytest.approx(1.0)
    assert not math.isnan(log["reward"]) and log["reward"] == pytest.approx(1.0)
