"""verl 0.9's real reward loop (RewardLoopWorker + NaiveRewardManager) with our reward file loaded from the documented
config key ``reward.custom_reward_function.path``, scoring against the real server.

The config is composed by Hydra from verl's own ``ppo_trainer`` with the command-line overrides docs/trainers.md
gives, so the documented lines are the tested ones. verl itself is installed without its GPU dependencies
(``--no-deps`` plus what this path imports, the ``trainers`` extra); the reward loop runs unchanged on CPU.
"""
from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
import pytest

verl = pytest.importorskip("verl")
reward_loop = pytest.importorskip("verl.experimental.reward_loop.reward_loop")
hydra = pytest.importorskip("hydra")

import numpy as np  # noqa: E402
import reward_client.verl as shipped  # noqa: E402
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager  # noqa: E402

from tests.support.reward_models import build_tokenizer  # noqa: E402
from tests.support.server import LiveServer, requests_to, run_server  # noqa: E402
from tests.support.trainer_verl import rollouts, run, verl_config  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("verl") / "tokenizer"
    build_tokenizer(path)
    return path


@pytest.fixture(autouse=True)
def routes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REWARD_CLIENT_URL", raising=False)  # the URL must come through verl's reward_kwargs
    monkeypatch.setenv("REWARD_CLIENT_VERL_ROUTES", json.dumps({"capitals": "exact_match"}))


def worker(tokenizer_dir: Path, server: LiveServer, name: str,
           more: tuple[str, ...] | list[str] = ()) -> reward_loop.RewardLoopWorker:
    config = verl_config([
        f"actor_rollout_ref.model.path={tokenizer_dir}",
        f"reward.custom_reward_function.path={shipped.__file__}",  # the lines of docs/trainers.md
        f"reward.custom_reward_function.name={name}",
        f"+reward.custom_reward_function.reward_kwargs.reward_service_url={server.url}",
        "+reward.custom_reward_function.reward_kwargs.retry_budget_s=600",
        *more,
    ])
    return reward_loop.RewardLoopWorker(config)


def test_the_legacy_top_level_key_is_not_what_verl_09_reads(tokenizer_dir: Path) -> None:
    """verl 0.9 accepts a top-level custom_reward_function block, but its reward loop reads reward.* only."""
    config = verl_config([f"actor_rollout_ref.model.path={tokenizer_dir}",
                          f"custom_reward_function.path={shipped.__file__}",
                          "custom_reward_function.name=compute_score"])
    assert config.reward.custom_reward_function.path is None
    assert reward_loop.RewardLoopWorker(config).reward_manager.compute_score.__name__ == "default_compute_score"


def test_async_reward_loop_256_samples_in_at_most_16_requests(tokenizer_dir: Path, server: LiveServer) -> None:
    n = 256
    truths = [f"city {i}" for i in range(n)]
    data = rollouts(tokenizer_dir, [t if i % 4 else "Lyon" for i, t in enumerate(truths)], truths,
                    [{"index": i} for i in range(n)])
    w = worker(tokenizer_dir, server, "compute_score_async")
    before = requests_to(server.url)
    outs = run(w, data)
    assert requests_to(server.url) - before <= 16
    scores = [o["reward_score"] for o in outs]
    assert scores == [1.0 if i % 4 else 0.0 for i in range(n)]
    keys = {tuple(sorted(o["reward_extra_info"])) for o in outs}
    assert len(keys) == 1  # verl stacks reward_extra_info per key: the same keys for every sample
    assert all(o["reward_extra_info"]["scored"] for o in outs)
    rm = NaiveRewardManager.assemble_rm_scores(data, scores)  # verl's own placement at the last response token
    assert rm.sum().item() == pytest.approx(sum(scores))


@pytest.mark.parametrize("name", ["compute_score_async", "compute_score"])
def test_reward_loop_through_jobs_gives_the_verify_paths_rewards(tokenizer_dir: Path, server: LiveServer,
                                                                 name: str) -> None:
    """``use_jobs`` in verl's reward_kwargs: the samples go as jobs carrying the configured tag and priority (listed
    by GET /v1/jobs?tag=), no /v1/verify request is made, and each sample's reward is the one /v1/verify gives."""
    n = 96
    truths = [f"city {i}" for i in range(n)]
    infos = [{"index": i} for i in range(n)]
    infos[5] = {"index": 5, "verifier": "test_down"}  # a null verdict comes through the jobs as well
    data = rollouts(tokenizer_dir, [t if i % 3 else "Lyon" for i, t in enumerate(truths)], truths, infos)
    expected = run(worker(tokenizer_dir, server, name), data)
    tag = f"verl-{uuid.uuid4().hex[:8]}"
    w = worker(tokenizer_dir, server, name, [
        "+reward.custom_reward_function.reward_kwargs.use_jobs=true",
        "+reward.custom_reward_function.reward_kwargs.jobs_priority=high",
        f"+reward.custom_reward_function.reward_kwargs.jobs_tags=[{tag},step:1]",
    ])
    before = requests_to(server.url)
    outs = run(w, data)
    assert requests_to(server.url) == before, "a sample went through /v1/verify"
    assert [o["reward_score"] for o in outs] == [o["reward_score"] for o in expected]
    assert [o["reward_extra_info"]["status"] for o in outs] == [o["reward_extra_info"]["status"] for o in expected]
    assert outs[5]["reward_extra_info"]["scored"] is False and outs[4]["reward_score"] == 1.0
    jobs = httpx.get(f"{server.url}/v1/jobs", params={"tag": tag}, timeout=30).json()["jobs"]
    assert jobs and all(j["priority"] == "high" and j["tags"] == [tag, "step:1"] for j in jobs)
    assert sum(j["counts"]["total"] for j in jobs) == n and all(j["state"] == "done" for j in jobs)
    assert len(jobs) < n, "the samples were not gathered into jobs"


def test_sync_compute_score_in_verls_thread_pool(tokenizer_dir: Path, server: LiveServer) -> None:
    """A sync compute_score runs in verl's default executor; padded options and null verdicts come through."""
    n = 48
    truths = ["Paris"] * n
    infos = [{"index": i, "verifier_options": {"ignore_case": False, "ignore_punctuation": None}} for i in range(n)]
    infos[7] = {"index": 7, "verifier": "test_down", "verifier_options": {"ignore_case": None}}
    responses = ["paris" if i % 2 else "Paris" for i in range(n)]
    w = worker(tokenizer_dir, server, "compute_score")
    before = requests_to(server.url)
    outs = run(w, rollouts(tokenizer_dir, responses, truths, infos))
    assert requests_to(server.url) - before < n  # samples from the pool's threads shared requests
    extra = [o["reward_extra_info"] for o in outs]
    assert [o["reward_score"] for i, o in enumerate(outs) if i != 7] == [0.0 if i % 2 else 1.0
                                                                         for i in range(n) if i != 7]
    assert (extra[7]["scored"], extra[7]["status"], outs[7]["reward_score"]) == (False, "unavailable", 0.0)
    assert sum(not e["scored"] for e in extra) == 1  # the null count verl's metrics can report
    assert all(re.fullmatch(r"\{.*\}", e["details"]) for e in extra)


def test_reward_loop_over_two_instances_from_a_hydra_list(tokenizer_dir: Path, tmp_path: Path) -> None:
    """The documented command-line list of URLs reaches the worker as an OmegaConf list; both instances serve."""
    with run_server(tmp_path) as a, run_server(tmp_path) as b:
        config = verl_config([
            f"actor_rollout_ref.model.path={tokenizer_dir}",
            f"reward.custom_reward_function.path={shipped.__file__}",
            "reward.custom_reward_function.name=compute_score_async",
            f"+reward.custom_reward_function.reward_kwargs.reward_service_url=[{a.url},{b.url}]",
        ])
        w = reward_loop.RewardLoopWorker(config)
        n = 512
        truths = [f"city {i}" for i in range(n)]
        data = rollouts(tokenizer_dir, [t if i % 4 else "Lyon" for i, t in enumerate(truths)], truths,
                        [{"index": i} for i in range(n)])
        before = [requests_to(s.url) for s in (a, b)]
        outs = run(w, data)
        assert [o["reward_score"] for o in outs] == [1.0 if i % 4 else 0.0 for i in range(n)]
        assert all(requests_to(s.url) > x for s, x in zip((a, b), before))  # both instances scored some
def test_agent_loop_samples_go_as_trajectories(tokenizer_dir: Path, server: LiveServer, monkeypatch) -> None:
    """What verl's agent loops hand the reward loop: ``tool_extra_fields`` (merged into extra_info by verl's
    NaiveRewardManager) with ``raw_prompt`` and, from a ToolAgentLoop that stores it, the conversation with its tool
    calls (dict arguments, as verl's ``_build_assistant_message`` writes them) and tool results."""
    monkeypatch.setenv("REWARD_CLIENT_VERL_ROUTES", json.dumps({"capitals": "math"}))
    prompt = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "What is 6*7?"}]

    def agent(first: str, final: str) -> list[dict]:
        return [
            {"role": "assistant", "content": first, "tool_calls": [
                {"type": "function", "id": "t0", "function": {"name": "calc", "arguments": {"expr": "6*7"}}}]},
            {"role": "tool", "content": "42", "tool_call_id": "t0"},
            {"role": "assistant", "content": final},
        ]

    fields = [
        {"raw_prompt": prompt, "messages": agent("Let me compute.", "It is \\boxed{42}."), "turn_scores": []},
        {"raw_prompt": prompt, "messages": agent("Maybe \\boxed{42}.", "No, \\boxed{41}."), "turn_scores": []},
        {"raw_prompt": prompt},  # a loop that stores no conversation: the decoded response is the assistant turn
    ]
    data = rollouts(tokenizer_dir, ["ignored", "ignored", "42"], ["42"] * 3, [{"index": i} for i in range(3)])
    data.non_tensor_batch["tool_extra_fields"] = np.array(fields, dtype=object)
    outs = run(worker(tokenizer_dir, server, "compute_score_async"), data)
    assert [o["reward_score"] for o in outs] == [1.0, 0.0, 1.0], [o["reward_extra_info"] for o in outs]
    sent = [shipped._item("capitals", "x", "42", f) for f in fields]
    assert [m["role"] for m in sent[0].messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert sent[0].messages[2]["tool_calls"][0]["function"]["arguments"] == '{"expr": "6*7"}'
    assert sent[2].messages[-1] == {"role": "assistant", "content": "x"} and sent[2].response is None
