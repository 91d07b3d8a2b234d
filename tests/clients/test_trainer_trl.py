"""TRL's real GRPOTrainer (the ``trainers`` extra) for a couple of CPU steps with a tiny random policy built on disk,
scoring through our reward functions against the real server."""
from __future__ import annotations

import inspect
import json
import math
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from reward_client.trl import make_async_reward_func, make_reward_func  # noqa: E402

from tests.support.live_restart import Restarter  # noqa: E402
from tests.support.reward_models import build_model  # noqa: E402
from tests.support.server import LiveServer  # noqa: E402

ROWS = [  # the opts column has different keys per row: datasets pads each row with the other rows' keys as None
    {"prompt": "Step 1: Natalia sold", "answer": "48", "pattern": ".", "opts": {"ignore_case": False}},
    {"prompt": "Let x be the", "answer": "5", "pattern": ".", "opts": {"ignore_punctuation": True}},
]


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_model(tmp_path_factory.mktemp("trl") / "policy", "causal_lm", seed=3)


def train(policy: Path, out: Path, reward_funcs: list, callbacks: list | None = None) -> trl.GRPOTrainer:
    dataset = datasets.Dataset.from_list(ROWS)
    assert dataset[0]["opts"] == {"ignore_case": False, "ignore_punctuation": None}  # the padding under test
    args = trl.GRPOConfig(
        output_dir=str(out), per_device_train_batch_size=4, num_generations=2, max_completion_length=8, max_steps=2,
        logging_steps=1, report_to="none", use_cpu=True, bf16=False, save_strategy="no", disable_tqdm=True,
        seed=0,
    )
    trainer = trl.GRPOTrainer(model=str(policy), reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                              callbacks=callbacks)
    trainer.train()
    return trainer


def step_logs(trainer: trl.GRPOTrainer) -> list[dict]:
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert [h["step"] for h in logs] == [1, 2]
    return logs


def test_grpo_steps_with_padded_options_logging_and_none_summed_as_zero(policy: Path, server: LiveServer,
                                                                         tmp_path: Path) -> None:
    em = make_reward_func("exact_match", reference="answer", options_column="opts", url=server.url)
    fmt = make_async_reward_func("regex", reference="pattern", url=server.url, name="fmt")
    down = make_async_reward_func("test_down", reference=None, url=server.url, name="down")
    trainer = train(policy, tmp_path, [em, fmt, down])
    for h in step_logs(trainer):
        assert h["exact_match_reward/null_count"] == 0 and h["exact_match_reward/status/ok"] == 1.0
        assert h["down/null_frac"] == 1.0 and h["down/status/unavailable"] == 1.0
        assert h["rewards/down/mean"] is None or math.isnan(h["rewards/down/mean"])
        # TRL 1.16 sums with nansum: the None of "down" counts as 0 beside the functions that scored.
        assert h["reward"] == pytest.approx(h["rewards/exact_match_reward/mean"] + h["rewards/fmt/mean"])
    extra = trainer._logs["extra"]  # what log_extra wrote into TRL's completions table
    assert set(extra["down/status"]) == {"unavailable"} and set(extra["exact_match_reward/status"]) == {"ok"}


def recorded(func: Any, seen: list[list[float | None]]) -> Any:
    """The reward function as TRL sees it (same name, sync or async), keeping each list of rewards it returned."""
    if inspect.iscoroutinefunction(func):
        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            seen.append(await func(*args, **kwargs))
            return seen[-1]
        wrapped_async.__name__ = func.__name__
        return wrapped_async

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        seen.append(func(*args, **kwargs))
        return seen[-1]
    wrapped.__name__ = func.__name__
    return wrapped


def test_reward_functions_through_jobs_give_the_verify_paths_rewards(policy: Path, server: LiveServer,
                                                                     tmp_path: Path) -> None:
    """``use_jobs``: the same completions scored through /v1/verify and through jobs (async and sync reward
    functions) get the same rewards, step by step, and the jobs are there under their tags."""
    run = uuid.uuid4().hex[:8]
    kinds = {"verify": {}, "jobs": {"use_jobs": True, "tags": [f"trl-{run}"], "priority": "low"}}
    seen: dict[str, list[list[float | None]]] = {}
    funcs = []
    for kind, extra in kinds.items():
        for make, verifier, reference in ((make_async_reward_func, "regex", "pattern"),
                                          (make_reward_func, "exact_match", "answer")):
            name = f"{verifier}_{kind}"
            tags = {"tags": [f"{tag}-{verifier}" for tag in extra["tags"]]} if "tags" in extra else {}
            func = make(verifier, reference=reference, url=server.url, name=name, **{**extra, **tags})
            funcs.append(recorded(func, seen.setdefault(name, [])))
    trainer = train(policy, tmp_path, funcs)
    step_logs(trainer)
    assert len(seen["regex_jobs"]) == 2 and seen["regex_jobs"] == seen["regex_verify"]
    assert len(seen["exact_match_jobs"]) == 2 and seen["exact_match_jobs"] == seen["exact_match_verify"]
    assert any(r is not None for rewards in seen["regex_jobs"] for r in rewards)
    scored = sum(len(rewards) for rewards in seen["regex_jobs"])
    for verifier in ("regex", "exact_match"):
        listed = httpx.get(f"{server.url}/v1/jobs", params={"tag": f"trl-{run}-{verifier}"}, timeout=30)
        jobs = listed.json()["jobs"]
        assert jobs and all(j["priority"] == "low" and j["state"] == "done" for j in jobs)
        assert sum(j["counts"]["total"] for j in jobs) == scored


def test_spec_reward_makes_one_null_component_void_the_sample(policy: Path, server: LiveServer,
                                                              tmp_path: Path) -> None:
    """The other choice: components in one spec reward, where on_null "null" leaves the sample out altogether."""
    components = [
        {"name": "fmt", "verifier": "regex"},
        {"name": "judge", "verifier": "test_down", "use_reference": False, "on_null": "null"},
    ]
    spec = make_reward_func("spec", reference="pattern", options={"components": components}, url=server.url)
    trainer = train(policy, tmp_path, [spec])
    for h in step_logs(trainer):
        assert h["spec_reward/null_frac"] == 1.0
        assert h["reward"] is None or math.isnan(h["reward"])  # unscorable: TRL gives these samples no advantage
    extra = trainer._logs["extra"]
    assert set(extra["spec_reward/status"]) == {"unavailable"}
    assert all(v is None for v in extra["spec_reward/judge"])  # per-component columns, the last batch's rows
    assert extra["spec_reward/fmt"] and set(extra["spec_reward/fmt"]) <= {0.0, 1.0}


@pytest.fixture()
def restarter(tmp_path: Path) -> Iterator[Restarter]:
    r = Restarter(tmp_path)
    yield r
    r.stop()


def test_grpo_run_survives_a_server_restart_between_steps(policy: Path, restarter: Restarter,
                                                           tmp_path: Path) -> None:
    from transformers import TrainerCallback

    restarter.start()
    later: list[threading.Thread] = []

    class RestartAfterFirstStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                restarter.stop()  # down now; back in 5 s, while step 2 is already waiting on its rewards
                timer = threading.Timer(5.0, restarter.start)
                timer.start()
                later.append(timer)

    em = make_reward_func("exact_match", reference="answer", url=restarter.url)  # default retry settings
    fmt = make_async_reward_func("regex", reference="pattern", url=restarter.url, name="fmt")
    trainer = train(policy, tmp_path / "out", [em, fmt], callbacks=[RestartAfterFirstStep()])
    for t in later:
        t.join()
    logs = step_logs(trainer)
    assert logs[1]["exact_match_reward/null_count"] == 0 and logs[1]["fmt/status/ok"] == 1.0


def test_grpo_run_over_two_instances_survives_one_killed_between_steps(policy: Path, tmp_path: Path) -> None:
    """The reward functions get both instances' URLs; after step 1 one instance is SIGKILLed, and step 2 is scored
    entirely by the other (no null reward), the dead one taken out of the rotation."""
    import os
    import signal

    from transformers import TrainerCallback

    servers = [Restarter(tmp_path / name) for name in ("a", "b")]
    try:
        for s in servers:
            s.start()
        a, b = servers

        class KillAfterFirstStep(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == 1 and b.live is not None:
                    os.kill(b.live.proc.pid, signal.SIGKILL)
                    b.live.proc.wait(timeout=30)

        urls = f"{a.url},{b.url}"
        em = make_reward_func("exact_match", reference="answer", url=[a.url, b.url])
        fmt = make_async_reward_func("regex", reference="pattern", url=urls, name="fmt_two")
        trainer = train(policy, tmp_path / "out", [em, fmt], callbacks=[KillAfterFirstStep()])
        logs = step_logs(trainer)
        assert all(h["exact_match_reward/null_count"] == 0 and h["fmt_two/status/ok"] == 1.0 for h in logs)
        stats = {s["url"]: s for s in em.client.instance_stats()}
        assert stats[b.url]["down"] and stats[b.url]["failures"] == 1  # step 2 met the dead instance and moved on
        assert stats[a.url]["items"] + stats[b.url]["items"] == 2 * 4
    finally:
        for s in servers:
            s.stop()
def tool_trajectory(question: str, first: str, final: str) -> list[dict]:
    """A completion as TRL 1.16's tool loop leaves it: the assistant turn that called a tool (``arguments`` a dict,
    no call id), the tool result TRL appended (named by the tool, no ``tool_call_id``), then the final turn."""
    return [
        {"role": "assistant", "content": first,
         "tool_calls": [{"type": "function", "function": {"name": "multiply", "arguments": {"a": 6, "b": 7}}}]},
        {"role": "tool", "name": "multiply", "content": "42"},
        {"role": "assistant", "content": final},
    ]


def test_tool_calling_conversations_reach_the_server_as_trajectories(policy: Path, server: LiveServer,
                                                                      tmp_path: Path) -> None:
    """TRL's own reward step (``GRPOTrainer._calculate_rewards``) over conversational prompts and tool-calling
    completions: the math reward scores each final turn, and the conversation reaches a worker whole."""
    math_reward = make_reward_func("math", reference="answer", url=server.url)
    turns = make_async_reward_func("test_turns", reference=None, url=server.url, name="turns")
    tools = make_reward_func("test_turns", reference=None, url=server.url, name="tools", tools_column="tools",
                             options={"count_tools": True})
    question = "What is 6 times 7?"
    spec = {"type": "function", "function": {"name": "multiply", "parameters": {"type": "object"}}}
    rows = [{"prompt": [{"role": "user", "content": question}], "answer": "42", "tools": json.dumps([spec])}] * 2
    args = trl.GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2,
                          max_completion_length=8, max_steps=1, report_to="none", use_cpu=True, bf16=False,
                          save_strategy="no", disable_tqdm=True)
    trainer = trl.GRPOTrainer(model=str(policy), reward_funcs=[math_reward, turns, tools], args=args,
                              train_dataset=datasets.Dataset.from_list(rows))
    completions = [
        tool_trajectory(question, "Let me multiply.", "So the answer is \\boxed{42}."),
        tool_trajectory(question, "It is \\boxed{42}, I think; checking.", "No: the answer is \\boxed{48}."),
    ]
    inputs = [{**row, "completion": c} for row, c in zip(rows, completions)]
    prompts = [row["prompt"] for row in rows]
    rewards = trainer._calculate_rewards(inputs, prompts, completions, [[1, 2, 3]] * 2)
    assert rewards[:, 0].tolist() == [1.0, 0.0]  # the final turn is the answer; 42 in an earlier turn is not
    assert rewards[:, 1].tolist() == [0.5, 0.5]  # of two assistant turns, the first called a tool
    assert rewards[:, 2].tolist() == [1.0, 1.0]  # the row's tool specs (a JSON column) came along
    assert prompts[0] == [{"role": "user", "content": question}]  # the trainer's own data left as it was
