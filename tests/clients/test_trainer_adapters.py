"""Each trainer adapter called exactly as its trainer calls it, against the real service.

- TRL's GRPOTrainer calls ``reward_func(prompts=..., completions=..., completion_ids=..., **reward_kwargs)`` where
  reward_kwargs holds every dataset column (a list per column) and ``trainer_state``.
- verl loads ``custom_reward_function.path`` with importlib from the file and calls ``compute_score(data_source=...,
  solution_str=..., ground_truth=..., extra_info=...)`` (or the batch form with plural names).
- OpenRLHF POSTs ``{"query", "prompts", "labels"}`` JSON to ``--reward.remote_url`` and reads rewards/scores and
  per-sample numeric extra_logs.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from reward_client.trl import completion_text, make_async_reward_func, make_reward_func

from tests.support.server import LiveServer

NUM_GENERATIONS = 3


def registered(server: LiveServer, name: str) -> bool:
    with server.client() as c:
        body = c.get("/v1/verifiers").json()
    names = [v["name"] for v in (body["verifiers"] if isinstance(body, dict) else body)]
    return name in names


def grpo_batch(completions: list, answers: list[str], conversational: bool) -> dict:
    """What GRPOTrainer passes for one step: prompts repeated per generation, columns aligned with completions."""
    n = len(completions)
    if conversational:
        prompts = [[{"role": "user", "content": f"question {i // NUM_GENERATIONS}"}] for i in range(n)]
    else:
        prompts = [f"question {i // NUM_GENERATIONS}" for i in range(n)]
    return {
        "prompts": prompts,
        "completions": completions,
        "completion_ids": [[101 + j for j in range(len(completion_text(c)))] for c in completions],
        "answer": answers,
        "source": ["unit"] * n,
        "trainer_state": object(),  # TRL passes its TrainerState; adapters must ignore it
    }


# --- TRL ---

def test_trl_sync_reward_func_with_plain_completions(server: LiveServer) -> None:
    reward_func = make_reward_func("exact_match", reference="answer", url=server.url)
    completions = ["42", " 42 ", "41", "Paris", "paris", "Lyon"]
    answers = ["42"] * 3 + ["Paris"] * 3
    rewards = reward_func(**grpo_batch(completions, answers, conversational=False))
    assert rewards == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    assert reward_func.__name__ == "exact_match_reward"


def test_trl_conversational_completions_and_null_stays_none(server: LiveServer) -> None:
    reward_func = make_reward_func(verifier_column="checker", reference="answer", url=server.url)
    completions = [
        [{"role": "assistant", "content": "Paris"}],
        [{"role": "assistant", "content": [{"type": "text", "text": "Par"}, {"type": "text", "text": "is"}]}],
        [{"role": "assistant", "content": "Rome"}],
        [{"role": "assistant", "content": "anything"}],
    ]
    batch = grpo_batch(completions, ["Paris"] * 4, conversational=True)
    batch["checker"] = ["exact_match", "exact_match", "exact_match", "test_down"]
    rewards = reward_func(**batch)
    assert rewards == [1.0, 1.0, 0.0, None]  # a backend that is down is "no reward", never 0


def test_trl_async_reward_func_awaited_concurrently(server: LiveServer) -> None:
    reward_a = make_async_reward_func("exact_match", reference="answer", url=server.url, name="em")
    reward_b = make_async_reward_func("regex", reference="pattern", url=server.url)
    completions = ["The answer is 12", "12", "no idea"]
    batch = grpo_batch(completions, ["12", "12", "12"], conversational=False)
    batch["pattern"] = [r"\b12\b"] * 3

    async def step() -> list:
        # TRL gathers the async reward functions of one step on its event loop.
        return list(await asyncio.gather(reward_a(**batch), reward_b(**batch)))

    first, second = asyncio.run(step())
    assert first == [0.0, 1.0, 0.0] and second == [1.0, 1.0, 0.0]
    assert reward_a.__name__ == "em"
    assert asyncio.run(step()) == [first, second]  # a second step on a fresh loop works too


def test_trl_missing_column_is_a_clear_error(server: LiveServer) -> None:
    reward_func = make_reward_func("exact_match", reference="solution", url=server.url)
    with pytest.raises(KeyError, match="'solution'.*answer"):
        reward_func(**grpo_batch(["1"], ["1"], conversational=False))


def test_trl_math_verifier(server: LiveServer) -> None:
    if not registered(server, "math"):
        pytest.skip("math verifier not registered on this build")
    reward_func = make_reward_func("math", reference="answer", url=server.url)
    completions = ["So the total is $\\boxed{\\frac{1}{2}}$.", "The answer is \\boxed{0.5}", "\\boxed{3}"]
    assert reward_func(**grpo_batch(completions, ["\\frac{1}{2}"] * 3, conversational=False)) == [1.0, 1.0, 0.0]


# --- verl ---


def test_verl_compute_score_routes_by_data_source(verl_module) -> None:
    compute_score = verl_module.compute_score
    out = compute_score(data_source="geo/capitals-v2", solution_str="Paris", ground_truth="paris",
                        extra_info={"split": "train", "index": 3})
    assert out["score"] == 1.0 and out["status"] == "ok" and out["verifier"] == "exact_match"
    assert out["scored"] is True and isinstance(json.loads(out["details"]), dict)
    wrong = compute_score("geo/capitals-v2", "Lyon", "paris", None)
    assert wrong["score"] == 0.0 and wrong["scored"] is True
    # A row can name its verifier; a null verdict becomes a float with the status beside it.
    down = compute_score("geo/capitals-v2", "x", "y", {"verifier": "test_down"})
    assert down["score"] == 0.0 and down["scored"] is False and down["status"] == "unavailable"
    assert set(down) == set(out)  # verl stacks reward_extra_info per key: same keys every sample
    with pytest.raises(ValueError, match="no verifier for data_source"):
        compute_score("some/unknown_set", "x", "y")


def test_verl_batch_form_and_null_score_setting(verl_module, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARD_CLIENT_NULL_SCORE", "-1")
    outs = verl_module.compute_score_batch(
        data_sources=["capitals"] * 4, solution_strs=["Paris", "Rome", "Oslo", "x"],
        ground_truths=["Paris", "Paris", "Oslo", None],
        extra_infos=[{}, {}, {"verifier_options": {"ignore_case": False}}, {}],
    )
    assert [o["score"] for o in outs] == [1.0, 0.0, 1.0, -1.0]
    assert outs[3]["status"] == "invalid_reference" and outs[3]["scored"] is False


def test_verl_async_and_numpy_ground_truth(verl_module) -> None:
    np = pytest.importorskip("numpy")

    async def go() -> dict:
        return await verl_module.compute_score_async("capitals", "B", np.array(["A", "B"]), {"index": np.int64(4)})

    assert asyncio.run(go())["score"] == 1.0


def test_verl_default_routes_send_gsm8k_to_math(verl_module, server: LiveServer) -> None:
    assert verl_module.route("openai/gsm8k") == "math"
    assert verl_module.route("DigitalLearningGmbH/MATH-lighteval") == "math"
    assert verl_module.route("codecontests") == "code"
    if not registered(server, "math"):
        pytest.skip("math verifier not registered on this build")
    out = verl_module.compute_score("openai/gsm8k", "She makes 9 * 2 = $18.\n#### 18", "18")
    assert out["verifier"] == "math" and out["status"] == "ok" and out["score"] == 1.0


# --- OpenRLHF ---

def openrlhf_post(url: str, payload: dict) -> httpx.Response:
    """As OpenRLHF's request_api_wrapper does: JSON body, content-type header, 180 s timeout, no auth header."""
    return httpx.post(url, json=payload, headers={"Content-Type": "application/json"}, timeout=180)


def test_openrlhf_remote_reward_protocol(openrlhf_server: LiveServer) -> None:
    url = f"{openrlhf_server.url}/openrlhf/reward?token=tok"
    prompts = ["<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n",
               "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n",
               "Q: colour of the sky?\nA: ",
               "Q: no label here\nA: "]
    responses = ["Paris<|im_end|>", "5<|im_end|><|endoftext|>", "blue", "whatever"]
    payload = {"query": [p + r for p, r in zip(prompts, responses)], "prompts": prompts,
               "labels": ["Paris", "4", "Blue", None]}
    r = openrlhf_post(url, payload)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"] == [1.0, 0.0, 1.0, -0.5]  # the last one has no usable reference: the null reward
    assert body["scores"] == [1.0, 0.0, 1.0, 0.0]  # scores are clipped to 0..1
    logs = body["extra_logs"]
    assert logs["status_ok"] == [1.0, 1.0, 1.0, 0.0] and logs["status_invalid_reference"] == [0, 0, 0, 1.0]
    assert logs["scored"] == [1.0, 1.0, 1.0, 0.0] and logs["prompt_found"] == [1.0] * 4
    assert all(len(v) == 4 and all(isinstance(x, (int, float)) for x in v) for v in logs.values())


def test_openrlhf_one_sample_per_call_and_bos_before_prompt(openrlhf_server: LiveServer) -> None:
    url = f"{openrlhf_server.url}/openrlhf/reward?token=tok"
    body = openrlhf_post(url, {"query": ["<s> Say hi: hi </s>"], "prompts": ["Say hi:"], "labels": ["hi"]}).json()
    assert body["rewards"] == [1.0] and body["extra_logs"]["prompt_found"] == [1.0]


def test_openrlhf_errors_and_auth(openrlhf_server: LiveServer) -> None:
    base = f"{openrlhf_server.url}/openrlhf/reward"
    ok = {"query": ["a"], "prompts": [""], "labels": ["a"]}
    assert openrlhf_post(base, ok).status_code == 401
    assert openrlhf_post(base + "?token=nope", ok).status_code == 401
    r = httpx.post(base, json=ok, headers={"Authorization": "Bearer tok"})
    assert r.status_code == 200 and r.json()["rewards"] == [1.0]
    bad = openrlhf_post(base + "?token=tok", {"query": ["a", "b"], "prompts": ["x"], "labels": ["a", "b"]})
    assert bad.status_code == 422 and "prompts has 1 entries for 2 queries" in bad.json()["detail"]
    missing = openrlhf_post(base + "?token=tok", {"prompts": ["x"]})
    assert missing.status_code == 422 and "query" in missing.json()["detail"]


def test_openrlhf_default_verifier_is_math(server: LiveServer) -> None:
    if not registered(server, "math"):
        pytest.skip("math verifier not registered on this build")
    prompt = "What is 1/2 + 1/4? Put the answer in \\boxed{}.\n"
    payload = {"query": [prompt + "We get $\\boxed{\\frac{3}{4}}$.", prompt + "\\boxed{1}"],
               "prompts": [prompt, prompt], "labels": ["\\frac{3}{4}", "\\frac{3}{4}"]}
    body = openrlhf_post(f"{server.url}/openrlhf/reward", payload).json()
    assert body["rewards"] == [1.0, 0.0]
    assert body["extra_logs"]["status_ok"] == [1.0, 1.0]


def test_shipped_adapters_import_without_the_service(tmp_path: Path) -> None:
    """The client package needs httpx only: import it with the service's packages hidden."""
    import subprocess
    import sys

    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('reward_service', 'verifiers', 'sandbox', 'fastapi', 'torch', 'pydantic'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import reward_client, reward_client.trl, reward_client.verl, reward_client.openrlhf, reward_client.coalesce\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "ok", out.stderr
