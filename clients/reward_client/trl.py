"""TRL adapter: reward functions with ``GRPOTrainer``'s calling convention.

    reward_fn = make_reward_func("math", reference="solution")
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_fn], train_dataset=ds)

TRL calls ``reward_fn(prompts=..., completions=..., completion_ids=..., **columns)`` where every dataset column
arrives as a list aligned with ``completions``. A null verdict (timeout, backend down, unusable reference) is
returned as ``None``, which TRL reads as "no reward for this sample" instead of a false 0.
"""
from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence

from reward_client.client import AsyncRewardClient, RewardClient
from reward_client.items import VerifyItem

RewardFunc = Callable[..., List[Optional[float]]]
AsyncRewardFunc = Callable[..., Awaitable[List[Optional[float]]]]


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

    def __init__(self, verifier: Optional[str], verifier_column: Optional[str], reference: Optional[str],
                 options: Optional[Dict[str, Any]], options_column: Optional[str]) -> None:
        if (verifier is None) == (verifier_column is None):
            raise ValueError("give exactly one of verifier (a name) or verifier_column (a dataset column)")
        self.verifier = verifier
        self.verifier_column = verifier_column
        self.reference = reference
        self.options = options or {}
        self.options_column = options_column

    @staticmethod
    def _column(kwargs: Dict[str, Any], name: str, n: int) -> Sequence[Any]:
        if name not in kwargs:
            columns = sorted(k for k in kwargs if k not in ("trainer_state", "log_extra", "log_metric"))
            raise KeyError(f"dataset column {name!r} not passed by the trainer; columns: {', '.join(columns)}")
        values = kwargs[name]
        if len(values) != n:
            raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
        return values

    def items(self, prompts: Optional[Sequence[Any]], completions: Sequence[Any], kwargs: Dict[str, Any]) -> List[VerifyItem]:
        n = len(completions)
        refs = self._column(kwargs, self.reference, n) if self.reference else [None] * n
        names = self._column(kwargs, self.verifier_column, n) if self.verifier_column else [self.verifier] * n
        opts = self._column(kwargs, self.options_column, n) if self.options_column else [None] * n
        groups = [_group_of(p) for p in prompts] if prompts is not None and len(prompts) == n else [None] * n
        return [
            VerifyItem(
                verifier=str(names[i]), response=completion_text(completions[i]), reference=refs[i],
                options={**self.options, **(opts[i] or {})}, id=str(i), group=groups[i],
            )
            for i in range(n)
        ]


def make_reward_func(
    verifier: Optional[str] = None,
    *,
    reference: Optional[str] = "answer",
    verifier_column: Optional[str] = None,
    options: Optional[Dict[str, Any]] = None,
    options_column: Optional[str] = None,
    client: Optional[RewardClient] = None,
    url: Optional[str] = None,
    token: Optional[str] = None,
    name: Optional[str] = None,
) -> RewardFunc:
    """A synchronous GRPOTrainer reward function scoring completions with one verifier (or one per row).

    ``reference`` names the dataset column holding the gold answer (None: no reference); ``verifier_column`` and
    ``options_column`` let each row pick its verifier and options. Service failures that outlast the client's
    retries raise, so a dead service stops training instead of silently rewarding nothing.
    """
    builder = _ItemBuilder(verifier, verifier_column, reference, options, options_column)
    own = client or RewardClient(url, token=token)

    def reward_func(prompts: Optional[Sequence[Any]] = None, completions: Sequence[Any] = (),
                    completion_ids: Optional[Sequence[Any]] = None, **kwargs: Any) -> List[Optional[float]]:
        if not completions:
            return []
        return [r.score for r in own.verify(builder.items(prompts, completions, kwargs))]

    reward_func.__name__ = name or f"{verifier or verifier_column}_reward"
    reward_func.client = own  # type: ignore[attr-defined]
    return reward_func


def make_async_reward_func(
    verifier: Optional[str] = None,
    *,
    reference: Optional[str] = "answer",
    verifier_column: Optional[str] = None,
    options: Optional[Dict[str, Any]] = None,
    options_column: Optional[str] = None,
    url: Optional[str] = None,
    token: Optional[str] = None,
    name: Optional[str] = None,
    client_factory: Optional[Callable[[], AsyncRewardClient]] = None,
) -> AsyncRewardFunc:
    """The ``async def`` variant, which TRL awaits concurrently with the other async reward functions.

    An httpx async client belongs to the event loop it was first used on, so one client is kept per loop.
    """
    builder = _ItemBuilder(verifier, verifier_column, reference, options, options_column)
    factory = client_factory or (lambda: AsyncRewardClient(url, token=token))
    clients: Dict[int, AsyncRewardClient] = {}

    async def reward_func(prompts: Optional[Sequence[Any]] = None, completions: Sequence[Any] = (),
                          completion_ids: Optional[Sequence[Any]] = None, **kwargs: Any) -> List[Optional[float]]:
        if not completions:
            return []
        loop_id = id(asyncio.get_running_loop())
        client = clients.get(loop_id)
        if client is None:
            client = clients[loop_id] = factory()
        return [r.score for r in await client.verify(builder.items(prompts, completions, kwargs))]

    reward_func.__name__ = name or f"{verifier or verifier_column}_reward"
    return reward_func

