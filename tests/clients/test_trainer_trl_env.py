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

import httpx  # noqa: E402
from reward_client.errors import SessionLost  # noqa: E402
from reward_client.trl_env import PythonEnvironment  # noqa: E402

from tests.support.scripted_policy import build_scripted_policy  # noqa: E402
from tests.support.server import run_env_server  # noqa: E402


def call(name: str, **arguments: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


SCRIPT = [call("run_code", code="x = 6 * 7") + "\n", call("run_code", code="print(x)") + "\n",
          call("final_answer", answer="42")]


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_scripted_policy(tmp_path_factory.mktemp("trl_env") / "policy", SCRIPT)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    with run_env_server(tmp_path_factory.mktemp("a")) as a, run_env_server(tmp_path_factory.mktemp("b")) as b:
        yield [a.url, b.url]


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


class ExactPython(PythonEnvironment):
    verifier = "exact_match"


def test_grpo_step_drives_python_sessions_and_takes_their_reward(policy: Path, two: list[str],
                                                                tmp_path: Path) -> None:
    rows = [{"prompt": [{"role": "user", "content": "What is 6 times 7?"}], "answer": "42"},
            {"prompt": [{"role": "user", "content": "What is 6 times 7, minus 1?"}], "answer": "41"}]
    trainer = train(policy, tmp_path, rows, partial(ExactPython, url=two))
    [log] = [h for h in trainer.state.log_history if "reward" in h]
    assert log["rewards/ExactPython/mean"] == pytest.approx(0.5)  # two rollouts of "42" right, two wrong
    # every call reached the instance holding its session (another would have answered session_lost)
    assert log["tools/call_frequency"] > 0 and log["tools/failure_frequency"] == 0
    envs = trainer._environment_pool[None]
    assert len(envs) == 4 and {env.session.url for env in envs} == set(two)  # spread over both instances
    assert sorted(env.session.reward for env in envs) == [0.0, 0.0, 1.0, 1.0]
    assert all(env.session.done and env.session.closed and env.failure is None for env in envs)
    completion = trainer._logs["completion"][-1]
    tool_turns = [m["content"] for m in completion if m.get("role") == "tool"]
    assert tool_turns[:3] == ["(no output)", "stdout:\n42\n", "Answer recorded."]  # one interpreter throughout


class LosingPython(ExactPython):
    """For rows marked ``lose``, the session is closed behind the client's back right after reset, as a reaper or
    a restarted instance would: its first step meets the server's ``session_lost``."""

    def reset(self, **row):
        shown = super().reset(**row)
        if row.get("lose"):
            session = self.session
            httpx.post(f"{session.url}/envs/python/close", json={"session_id": session.session_id}).raise_for_status()
        return shown


def test_a_lost_session_masks_the_rollout_instead_of_scoring_it_zero(policy: Path, two: list[str],
                                                                    tmp_path: Path) -> None:
    rows = [{"prompt": [{"role": "user", "content": "What is 6 times 7?"}], "answer": "42", "lose": True},
            {"prompt": [{"role": "user", "content": "What is 6 times 7?"}], "answer": "42", "lose": False}]
    trainer = train(policy, tmp_path, rows, partial(LosingPython, url=two))
    [log] = [h for h in trainer.state.log_history if "reward" in h]
    envs = trainer._environment_pool[None]
    lost = [env for env in envs if env.failure is not None]
    assert len(lost) == 2 and all(isinstance(env.failure, SessionLost) for env in lost)
    assert [env.get_reward() for env in lost] == [None, None]  # masked, not 0
    assert log["tools/failure_frequency"] > 0
    # TRL averages the environment's reward over the rollouts it scored: the two kept ones earned 1.0 each
    assert log["rewards/LosingPython/mean"] == pytest.approx(1.0)
    assert not math.isnan(log["reward"]) and log["reward"] == pytest.approx(1.0)


def test_sql_environment_as_trl_calls_it(two: list[str]) -> None:
    """What TRL does with an instance, by hand: reset with a row (the tables appended to the prompt), the query tool,
    the final answer, get_reward; then reset again with the next row, which closes the first session."""
    from reward_client.trl_env import SqlEnvironment

    class ExactSql(SqlEnvironment):
        verifier = "exact_match"

    env = ExactSql(url=two)
    row = {"prompt": [{"role": "user", "content": "How many singers are there?"}], "answer": "7",
           "database": "concert_singer"}
    shown = env.reset(**row)
    assert shown is not None and "singer_in_concert" in shown
    assert env.query("SELECT count(*) FROM singer") == 'columns: ["count(*)"]\nrows: [[7]]'
    assert "no such table" in env.query("SELECT * FROM nowhere")  # the policy's error, told to it
    assert env.final_answer("7") == "Answer recorded."
    assert env.get_reward() == 1.0
    first = env.session
    env.reset(**{**row, "answer": "6"})
    assert first.closed and env.session is not first
    assert env.get_reward() == 0.0  # no answer given: scored when closed


def test_bfcl_environment_as_trl_calls_it(two: list[str]) -> None:
    """BFCL's multi-turn tasks through the TRL class: the ground truth's calls of each turn through ``call_functions``,
    then ``end_turn``, earn 1; the same episode with its first turn's calls left out earns 0. (A task whose ground
    truth names every argument: BFCL's decoder drops a model's positional arguments, and so does the service.)"""
    from reward_client.trl_env import BfclEnvironment

    from verifiers.kinds.bfcl import source

    if not source.available():
        pytest.skip("bfcl-eval is not installed (scripts/setup.sh: pip install --no-deps bfcl-eval)")
    task = source.load_task("multi_turn_base_1")
    tools = {n for n, f in vars(BfclEnvironment).items() if callable(f) and not n.startswith("_")} - {
        "reset", "get_reward"}
    assert tools == {"call_functions", "end_turn"}  # what TRL offers the model: no final_answer to cut BFCL short

    def play(skip_first: bool) -> float | None:
        env = BfclEnvironment(url=two)
        shown = env.reset(task_id=task.id, prompt=[{"role": "user", "content": "(the task's first turn)"}])
        assert shown is not None and task.ground_truth[0][0].split("(")[0] in shown  # the turn's function docs
        for i, calls in enumerate(task.ground_truth):
            if calls and not (skip_first and i == 0):
                assert env.call_functions("[" + ", ".join(calls) + "]").startswith("status: results")
            env.end_turn("Done.")
        return env.get_reward()

    assert play(skip_first=False) == 1.0
    assert play(skip_first=True) == 0.0
