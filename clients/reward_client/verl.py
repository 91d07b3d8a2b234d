"""verl adapter: a file usable as verl 0.9's ``reward.custom_reward_function.path``.

    reward:
      custom_reward_function:
        path: /path/to/reward_client/verl.py   # python -c "import reward_client.verl as m; print(m.__file__)"
        name: compute_score_async              # or compute_score (verl runs it in a thread pool)
        reward_kwargs: {retry_budget_s: 600}   # optional: reward_service_url, retry_budget_s, use_jobs,
                                               #   jobs_priority, jobs_tags

verl 0.9's reward loop calls the function once per sample (the batch reward manager is gone from it); both entry
points coalesce concurrent samples of the process into batched requests (``reward_client.coalesce``), and retry
through a restart of the service for ``retry_budget_s`` (``REWARD_CLIENT_RETRY_BUDGET_S``, 300 s) before raising.
``compute_score_batch`` remains for older verl versions' batch reward manager.

With ``use_jobs: true`` the coalesced samples go as jobs (``/v1/jobs``) instead of ``/v1/verify`` requests: each
sample's reward returns as soon as its own verdict streams in rather than when its whole batch is done, the job
store keeps accepted samples across a restart of the service, and the jobs carry ``jobs_priority`` (high, normal,
low; validation after training: ``low``) and ``jobs_tags`` (default ``["verl"]``), so ``DELETE /v1/jobs?tag=...``
drops a stale step's rewards still queued.

The server is ``REWARD_CLIENT_URL`` (token ``REWARD_CLIENT_TOKEN``); several instances, which then share the work,
are listed there with commas, or in ``reward_service_url`` (a string with commas, or a YAML list). Each sample goes
to a verifier chosen by its ``data_source`` (see ``DEFAULT_ROUTES``; extend with
``REWARD_CLIENT_VERL_ROUTES='{"my_set": "ifeval"}'``, set a catch-all with ``REWARD_CLIENT_VERL_DEFAULT``), or by
``extra_info["verifier"]`` when the row names one.

An agent-loop sample goes as a trajectory (``messages``): the prompt's messages from ``raw_prompt``, then the
conversation the loop stored in its ``extra_fields["messages"]`` or else the decoded response (see ``trajectory``).

verl needs a float reward, so a null verdict (timeout, backend down, unusable reference) is reported as
``REWARD_CLIENT_NULL_SCORE`` (default 0.0) with ``scored = False`` and its ``status`` beside it, so the rate of
infrastructure trouble shows up in verl's ``reward_extra_info`` instead of hiding inside the mean reward.
"""
from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from reward_client.client import shared_coalescer
from reward_client.coalesce import Coalescer, LoopThread
from reward_client.items import VerifyItem, set_options
from reward_client.messages import is_conversation, openai_messages
from reward_client.protocol import ClientConfig, join_urls
from reward_client.results import VerifyResult
from reward_client.retry import trainer_policy

ROUTES_ENV = "REWARD_CLIENT_VERL_ROUTES"
DEFAULT_ENV = "REWARD_CLIENT_VERL_DEFAULT"
NULL_SCORE_ENV = "REWARD_CLIENT_NULL_SCORE"
_ENV_LOOP = LoopThread("reward-client-verl-envs")  # where verl's thread-pool calls reach environment sessions

# Substrings of a lower-cased data_source → verifier, first match wins (verl's own names included:
# openai/gsm8k, lighteval/MATH, DigitalLearningGmbH/MATH-lighteval, HuggingFaceH4/MATH-500, numina_*, codecontests,
# apps, taco, codeforces...).
DEFAULT_ROUTES: tuple[tuple[str, str], ...] = (
    ("gsm8k", "math"), ("math", "math"), ("aime", "math"), ("amc", "math"), ("numina", "math"),
    ("olympiad", "math"), ("deepscaler", "math"), ("dapo", "math"), ("minerva", "math"),
    ("codecontests", "code"), ("apps", "code"), ("taco", "code"), ("codeforces", "code"), ("humaneval", "code"),
    ("mbpp", "code"), ("livecodebench", "code"), ("primeintellect", "code"), ("code", "code"),
    ("ifeval", "ifeval"), ("gpqa", "multiple_choice"), ("mmlu", "multiple_choice"),
)



def route(data_source: str, extra_info: Mapping[str, Any] | None = None) -> str:
    """The verifier for one sample: the row's own choice, then configured routes, then the defaults."""
    if extra_info and extra_info.get("verifier"):
        return str(extra_info["verifier"])
    source = str(data_source)
    configured = json.loads(os.environ.get(ROUTES_ENV) or "{}")
    if not isinstance(configured, dict):
        raise ValueError(f"{ROUTES_ENV} must be a JSON object mapping data_source patterns to verifiers")
    if source in configured:
        return str(configured[source])
    lowered = source.lower()
    for pattern, verifier in [*configured.items(), *DEFAULT_ROUTES]:
        if pattern.lower() in lowered:
            return str(verifier)
    fallback = os.environ.get(DEFAULT_ENV)
    if fallback:
        return fallback
    raise ValueError(
        f"no verifier for data_source {source!r}: set extra_info['verifier'], add it to {ROUTES_ENV}, "
        f"or set {DEFAULT_ENV}"
    )


def _jsonable(value: Any) -> Any:
    """verl hands numpy scalars and arrays around; the wire needs plain Python."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def trajectory(solution_str: str, extra_info: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The conversation of an agent-loop sample, or None for a plain one.

    verl 0.9's agent loops put their ``extra_fields`` into ``extra_info`` (``tool_extra_fields``): ``raw_prompt``
    always (the prompt's messages), and whatever the loop stored there, such as ``messages`` (the ToolAgentLoop's
    conversation: assistant turns with their tool calls, tool results). With ``messages`` the trajectory is that
    conversation (after the prompt when it holds none); with only ``raw_prompt`` it is the prompt then the decoded
    response as one assistant turn, so a judge still reads the question.
    """
    if not extra_info:
        return None
    messages, prompt = _jsonable(extra_info.get("messages")), _jsonable(extra_info.get("raw_prompt"))
    if is_conversation(messages):
        asked = any(m.get("role") in ("system", "user") for m in messages)
        head = list(prompt) if is_conversation(prompt) and not asked else []
        return openai_messages([*head, *messages])
    if is_conversation(prompt):
        return openai_messages([*prompt, {"role": "assistant", "content": solution_str}])
    return None


def _item(data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None) -> VerifyItem:
    info = extra_info if isinstance(extra_info, Mapping) else None
    options = set_options(info.get("verifier_options")) if info else {}
    item = VerifyItem(route(data_source, info), solution_str, _jsonable(ground_truth), _jsonable(options))
    messages = trajectory(solution_str, info)
    if messages is not None:
        item.response, item.messages = None, messages
    tools = _jsonable(info.get("tools")) if info else None
    item.tools = tools if isinstance(tools, list) else None  # a plain response's calls are read with them too
    return item


def to_verl(result: VerifyResult) -> dict[str, Any]:
    """The dict verl logs: the same keys for every sample (verl stacks them per key), scalars only."""
    null_score = float(os.environ.get(NULL_SCORE_ENV) or 0.0)
    return {
        "score": result.score if result.score is not None else null_score,
        "scored": result.score is not None,
        "status": result.status,
        "verifier": result.verifier,
        "reason": result.reason,
        "details": json.dumps(result.details, ensure_ascii=False, default=str),
        "elapsed_ms": float(result.elapsed_ms),
    }


def coalescer(reward_service_url: str | Sequence[str] | None = None, retry_budget_s: float | None = None,
              **_: Any) -> Coalescer:
    """The process's coalescer for these settings (a forked worker makes its own; loops and threads share one).
    ``reward_service_url`` may name several instances: a list, or one string with commas."""
    return shared_coalescer(ClientConfig(join_urls(reward_service_url), retry=trainer_policy(retry_budget_s)))


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's per-sample reward function; concurrent calls from verl's thread pool share batched requests.

    ``kwargs`` may carry ``reward_service_url`` and ``retry_budget_s`` (verl's ``reward_kwargs``). A trajectory
    with an environment session is scored as in ``compute_score_async``.
    """
    if environment_entry(extra_info) is not None:
        coro = compute_score_async(data_source, solution_str, ground_truth, extra_info, **kwargs)
        result: dict[str, Any] = asyncio.run_coroutine_threadsafe(coro, _ENV_LOOP.loop()).result()
        return result
    item = _item(data_source, solution_str, ground_truth, extra_info)
    jobs = _jobs(**kwargs)
    if jobs is not None:
        return to_verl(coalescer(**kwargs).verify_as_job([item], *jobs)[0])
    return to_verl(coalescer(**kwargs).verify([item])[0])


async def compute_score_async(data_source: str, solution_str: str, ground_truth: Any,
                              extra_info: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """The same for verl's asynchronous reward loop: the samples it gathers become a few batched requests.

    A trajectory that used an environment (``reward_client.verl_tool``) is scored by its session instead: the
    response is its final answer, and a session lost during the rollout is a null verdict."""
    entry = environment_entry(extra_info)
    if entry is not None:
        from reward_client.verl_tool import finish

        reward, status, reason = await finish(entry, _final_text(solution_str, extra_info))
        return to_verl(VerifyResult(reward, status, reason, verifier=f"env:{entry.get('env')}"))
    item = _item(data_source, solution_str, ground_truth, extra_info)
    jobs = _jobs(**kwargs)
    if jobs is not None:
        return to_verl((await coalescer(**kwargs).averify_as_job([item], *jobs))[0])
    return to_verl((await coalescer(**kwargs).averify([item]))[0])


def _jobs(use_jobs: Any = False, jobs_priority: str = "normal", jobs_tags: str | Sequence[str] | None = None,
          **_: Any) -> tuple[str, list[str]] | None:
    """(priority, tags) when ``reward_kwargs`` ask for jobs (``use_jobs``), else None. Tags: a list, or one string
    with commas (as a command-line override writes it)."""
    if not use_jobs or (isinstance(use_jobs, str) and use_jobs.strip().lower() in ("", "0", "false", "no", "off")):
        return None
    if jobs_tags is None:
        tags = ["verl"]
    elif isinstance(jobs_tags, str):
        tags = [t.strip() for t in jobs_tags.split(",") if t.strip()]
    else:
        tags = [str(t) for t in jobs_tags]
    return str(jobs_priority), tags


def environment_entry(extra_info: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The environment session a trajectory's tool calls opened (``extra_info["reward_service_env"]``)."""
    sessions = extra_info.get("reward_service_env") if isinstance(extra_info, Mapping) else None
    if isinstance(sessions, Mapping):
        for entry in sessions.values():
            if isinstance(entry, Mapping) and (entry.get("session_id") or entry.get("failure")):
                return entry
    return None


def _final_text(solution_str: str, extra_info: Mapping[str, Any] | None) -> str:
    """The answer to submit: the conversation's final assistant turn where the loop stored it, else the response."""
    messages = _jsonable(extra_info.get("messages")) if isinstance(extra_info, Mapping) else None
    text = solution_str
    if isinstance(messages, list) and is_conversation(messages) and messages:
        last = messages[-1]
        # a loop stopped by its turn limit never appends its last turn: then the whole response is the answer
        if last.get("role") == "assistant" and isinstance(last.get("content"), str):
            text = str(last["content"])
    return strip_end_markers(text)


# end-of-turn tokens that verl's tool parser leaves in the decoded turn (Qwen/ChatML, Llama 3, Gemma, Phi, Mistral)
END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "</s>")


def strip_end_markers(text: str) -> str:
    """The turn's text without the end-of-turn tokens at its end (the model's answer, as a verifier should see it)."""
    text = text.rstrip()
    while True:
        for marker in END_MARKERS:
            if text.endswith(marker):
                text = text[: -len(marker)].rstrip()
                break
        else:
            return text


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[dict[str, Any] | None] | None = None,
                        **kwargs: Any) -> list[dict[str, Any]]:
    """verl's BatchRewardManager form: the whole batch in as few requests as the client's chunking allows."""
    infos = extra_infos if extra_infos is not None else [None] * len(solution_strs)
    items = [_item(d, s, g, e) for d, s, g, e in zip(data_sources, solution_strs, ground_truths, infos)]
    jobs = _jobs(**kwargs)
    if jobs is not None:
        return [to_verl(r) for r in coalescer(**kwargs).verify_as_job(items, *jobs)]
    return [to_verl(r) for r in coalescer(**kwargs).verify(items)]
