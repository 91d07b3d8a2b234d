"""TRL adapter: reward functions with ``GRPOTrainer``'s calling convention.

    reward_fn = make_reward_func("math", reference="solution")
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_fn], train_dataset=ds)

TRL calls ``reward_fn(prompts=..., completions=..., completion_ids=..., **columns)`` where every dataset column
arrives as a list aligned with ``completions``, plus ``log_metric`` and ``log_extra``: each function logs its null
count, status shares and (for the ``spec`` verifier) per-component rewards through them.

A conversational completion (a list of messages: assistant turns, their tool calls, the tool results TRL's tool
loop appended) goes to the server as a trajectory (``messages``, after the prompt's messages): text verifiers score
its final assistant turn, judges read the whole conversation.

A null verdict (timeout, backend down, unusable reference) is returned as ``None`` (or ``on_null`` when given).
TRL 1.16 sums the functions' weighted rewards with ``nansum``: a None counts as 0 when another function scored the
sample, and only a sample where every function returned None is left out (advantage 0). To make one component's
null void the whole sample instead, score the components in one ``spec`` reward with ``on_null: "null"``.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from reward_client.client import AsyncRewardClient, RewardClient, shared_coalescer
from reward_client.items import VerifyItem, set_options
from reward_client.messages import is_conversation, openai_messages
from reward_client.protocol import ClientConfig, Timeout, Urls, join_urls
from reward_client.results import VerifyResult
from reward_client.retry import RetryPolicy, trainer_policy

RewardFunc = Callable[..., list[float | None]]
AsyncRewardFunc = Callable[..., Awaitable[list[float | None]]]
TRAINER_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments")


def completion_text(completion: Any) -> str:
    """The text to score: a plain string, or the assistant turns of a chat completion joined together.

    Message content may itself be a list of parts (``{"type": "text", "text": ...}``); only text parts count.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        raise TypeError(f"a completion must be a string or a list of chat messages, not {type(completion).__name__}")
    messages = [m for m in completion if isinstance(m, dict)]
    assistant = [m for m in messages if m.get("role") == "assistant"] or messages
    return "".join(_content_text(m.get("content")) for m in assistant)


def trajectory(prompt: Any, completion: Any) -> list[dict[str, Any]]:
    """A conversational completion (assistant turns, their tool calls, the tool results TRL appended) after its
    prompt's messages, in the service's message shape: text verifiers score its final assistant turn, judges read
    it whole."""
    if isinstance(completion, Mapping):
        completion = [completion]
    if not is_conversation(completion):
        raise TypeError(f"a completion must be a string or a list of chat messages, not {type(completion).__name__}")
    if is_conversation(prompt):
        head = list(prompt)
    elif isinstance(prompt, str) and prompt:
        head = [{"role": "user", "content": prompt}]
    else:
        head = []
    return openai_messages([*head, *completion])


def _tool_specs(value: Any) -> list[dict[str, Any]] | None:
    """A row's tool specs: a list of OpenAI specs, or its JSON text (a dataset column of nested dicts is often stored
    as a string)."""
    if isinstance(value, str):
        value = json.loads(value)
    return list(value) if value else None


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return str(content)


def _group_of(prompt: Any) -> str:
    """Completions of one prompt form a GRPO group; a digest of the prompt names it."""
    text = prompt if isinstance(prompt, str) else repr(prompt)
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


class _ItemBuilder:
    """Turns one TRL call into verify items according to the column mapping."""

    def __init__(self, verifier: str | None, verifier_column: str | None, reference: str | None,
                 options: dict[str, Any] | None, options_column: str | None, tools_column: str | None = None) -> None:
        if (verifier is None) == (verifier_column is None):
            raise ValueError("give exactly one of verifier (a name) or verifier_column (a dataset column)")
        self.verifier = verifier
        self.verifier_column = verifier_column
        self.reference = reference
        self.options = options or {}
        self.options_column = options_column
        self.tools_column = tools_column

    @staticmethod
    def _column(kwargs: dict[str, Any], name: str, n: int) -> Sequence[Any]:
        if name not in kwargs:
            columns = sorted(k for k in kwargs if k not in TRAINER_KWARGS)
            raise KeyError(f"dataset column {name!r} not passed by the trainer; columns: {', '.join(columns)}")
        values = kwargs[name]
        if len(values) != n:
            raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
        return values

    def items(self, prompts: Sequence[Any] | None, completions: Sequence[Any],
              kwargs: dict[str, Any]) -> list[VerifyItem]:
        n = len(completions)
        refs = self._column(kwargs, self.reference, n) if self.reference else [None] * n
        names = self._column(kwargs, self.verifier_column, n) if self.verifier_column else [self.verifier] * n
        opts = self._column(kwargs, self.options_column, n) if self.options_column else [None] * n
        tools = self._column(kwargs, self.tools_column, n) if self.tools_column else [None] * n
        groups = [_group_of(p) for p in prompts] if prompts is not None and len(prompts) == n else [None] * n
        items = []
        for i in range(n):
            item = VerifyItem(verifier=str(names[i]), reference=refs[i], options=set_options(self.options, opts[i]),
                              id=str(i), group=groups[i])
            if isinstance(completions[i], str):
                item.response = completions[i]
            else:
                item.messages = trajectory(prompts[i] if prompts is not None and len(prompts) == n else None,
                                           completions[i])
            item.tools = _tool_specs(tools[i])  # a text completion's calls are read with them too
            items.append(item)
        return items


class _Logger:
    """Reports one function's verdicts through TRL's ``log_metric``/``log_extra`` (ignored when TRL passes none).

    A status once seen keeps being logged (as 0 when absent), since TRL averages a metric only over the steps that
    logged it.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.statuses: set[str] = set()
        self.components: set[str] = set()

    def __call__(self, results: list[VerifyResult], kwargs: dict[str, Any]) -> None:
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        n = len(results)
        nulls = sum(r.score is None for r in results)
        self.statuses.update(r.status for r in results)
        per_component = [r.details.get("components") if isinstance(r.details, dict) else None for r in results]
        self.components.update(k for c in per_component if isinstance(c, dict) for k in c)
        if callable(log_metric):
            log_metric(f"{self.name}/null_count", float(nulls))
            log_metric(f"{self.name}/null_frac", nulls / n)
            for status in sorted(self.statuses):
                log_metric(f"{self.name}/status/{status}", sum(r.status == status for r in results) / n)
        if callable(log_extra):
            log_extra(f"{self.name}/status", [r.status for r in results])
        for comp in sorted(self.components):
            values = [_component_score(c, comp) for c in per_component]
            present = [v for v in values if v is not None]
            if callable(log_metric) and present:
                log_metric(f"{self.name}/{comp}/mean", math.fsum(present) / len(present))
            if callable(log_extra):
                log_extra(f"{self.name}/{comp}", values)


def _component_score(components: Any, name: str) -> float | None:
    entry = components.get(name) if isinstance(components, dict) else None
    score = entry.get("score") if isinstance(entry, dict) else None
    return float(score) if isinstance(score, (int, float)) else None


def _rewards(results: list[VerifyResult], on_null: float | None) -> list[float | None]:
    return [r.score if r.score is not None else on_null for r in results]


def make_reward_func(
    verifier: str | None = None,
    *,
    reference: str | None = "answer",
    verifier_column: str | None = None,
    options: dict[str, Any] | None = None,
    options_column: str | None = None,
    tools_column: str | None = None,
    client: RewardClient | None = None,
    url: Urls = None,
    token: str | None = None,
    name: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout = 180.0,
    on_null: float | None = None,
    use_jobs: bool = False,
    priority: str = "normal",
    tags: Sequence[str] = ("trl",),
) -> RewardFunc:
    """A synchronous GRPOTrainer reward function scoring completions with one verifier (or one per row).

    ``reference`` names the dataset column holding the gold answer (None: no reference); ``verifier_column``,
    ``options_column`` and ``tools_column`` let each row pick its verifier, options and tools. Service failures that
    outlast the client's retries raise, so a dead service stops training instead of silently rewarding nothing.
    ``use_jobs``: score through jobs (``/v1/jobs``, see ``make_async_reward_func``) at ``priority`` with ``tags``.
    """
    builder = _ItemBuilder(verifier, verifier_column, reference, options, options_column, tools_column)
    own = client or RewardClient(url, token=token, retry=retry or trainer_policy(), timeout=timeout)
    func_name = name or f"{verifier or verifier_column}_reward"
    log = _Logger(func_name)

    def reward_func(prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                    completion_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
        if not completions:
            return []
        items = builder.items(prompts, completions, kwargs)
        if use_jobs:
            results = own.submit(items, priority=priority, tags=tags).results()
        else:
            results = own.verify(items)
        log(results, kwargs)
        return _rewards(results, on_null)

    reward_func.__name__ = func_name
    # callers reach the client as reward_func.client; set through __dict__ since mypy models no function attributes
    reward_func.__dict__["client"] = own
    return reward_func


def make_async_reward_func(
    verifier: str | None = None,
    *,
    reference: str | None = "answer",
    verifier_column: str | None = None,
    options: dict[str, Any] | None = None,
    options_column: str | None = None,
    tools_column: str | None = None,
    url: Urls = None,
    token: str | None = None,
    name: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout = 180.0,
    on_null: float | None = None,
    client_factory: Callable[[], AsyncRewardClient] | None = None,
    use_jobs: bool = False,
    priority: str = "normal",
    tags: Sequence[str] = ("trl",),
) -> AsyncRewardFunc:
    """The ``async def`` variant, which TRL awaits concurrently with the other async reward functions.

    By default the calls of every async reward function with the same settings share one coalescer, so the
    functions TRL gathers in one step travel in one request. With ``client_factory``, one client per event loop is
    made from it instead (an httpx async client belongs to the loop it was first used on).

    ``use_jobs``: the same batches go as jobs (``/v1/jobs``): each call returns once its own completions' verdicts
    have streamed in, the service's job store keeps accepted items across its restart, and the jobs carry
    ``priority`` (high, normal, low: an evaluation function at ``low`` yields to training's) and ``tags`` (for
    ``DELETE /v1/jobs?tag=...``, dropping a stale step's queued items).
    """
    builder = _ItemBuilder(verifier, verifier_column, reference, options, options_column, tools_column)
    config = ClientConfig(join_urls(url), token, timeout, retry or trainer_policy())
    clients: dict[int, AsyncRewardClient] = {}
    func_name = name or f"{verifier or verifier_column}_reward"
    log = _Logger(func_name)

    async def verify(items: list[VerifyItem]) -> list[VerifyResult]:
        if client_factory is None:
            coalescer = shared_coalescer(config)
            if use_jobs:
                return await coalescer.averify_as_job(items, priority, tags)
            return await coalescer.averify(items)
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in clients:
            clients[loop_id] = client_factory()
        if use_jobs:
            submission = await clients[loop_id].submit(items, priority=priority, tags=tags)
            return list(await asyncio.gather(*submission.futures))
        return await clients[loop_id].verify(items)

    async def reward_func(prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                          completion_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
        if not completions:
            return []
        results = await verify(builder.items(prompts, completions, kwargs))
        log(results, kwargs)
        return _rewards(results, on_null)

    reward_func.__name__ = func_name
    return reward_func
