"""Multi-turn trajectories in the verifier contract: OpenAI chat messages (system/user/assistant/tool) that an item may
carry instead of one response string.

A text verifier never sees the conversation: the item's ``response`` is the text of the final assistant turn
(``final_text``), so an answer the model gave in an earlier turn and then corrected is not a hedge, and an answer
that only an earlier turn holds is not the answer. A verifier that wants the whole trajectory (the judges, tool-call
checks) reads ``current()`` while it runs: the engine binds the item's messages and tools around each check, in a
worker process as on the event loop. Tool specs may come with a plain response too (a trainer that holds only the
generated text): ``current_tools()`` reads them either way.
"""
from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from verifiers.types import VerifyItem

Message = dict[str, Any]


def content_text(content: Any) -> str:
    """The text of a message's content: the string itself, its text parts joined, or "" for null (an assistant turn
    made only of tool calls). Parts are joined with nothing between them, as chat templates render them: the text
    scored is the text the model wrote."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))


def assistant_turns(messages: list[Message]) -> list[int]:
    """Positions of the assistant messages: the turns a per-turn score (``Verdict.turn_scores``) is given for."""
    return [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]


def final_text(messages: list[Message]) -> str:
    """The text of the last assistant turn, "" when it holds only tool calls or there is no assistant turn."""
    turns = assistant_turns(messages)
    return content_text(messages[turns[-1]].get("content")) if turns else ""


def tool_call_parts(call: dict[str, Any]) -> tuple[str, str]:
    """(name, arguments) of an assistant tool call in the OpenAI shape; arguments stay the JSON text the model wrote
    (a dict, as some chat templates carry it, is written back as JSON)."""
    function = call.get("function") or {}
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return str(function.get("name", "")), arguments


@dataclass(frozen=True)
class Trajectory:
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None

    @property
    def final_text(self) -> str:
        return final_text(self.messages)


_current: contextvars.ContextVar[Trajectory | None] = contextvars.ContextVar("trajectory", default=None)
_tools: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("tools", default=None)


def current() -> Trajectory | None:
    """The trajectory of the item being checked, or None when it came as a plain response."""
    return _current.get()


def current_tools() -> list[dict[str, Any]] | None:
    """The tool specs the item being checked was given, with its messages or with its plain response."""
    return _tools.get()


@contextmanager
def bound(messages: list[Message] | None, tools: list[dict[str, Any]] | None = None) -> Iterator[None]:
    """Bind an item's trajectory (None: a plain response) and tool specs for the check that runs inside."""
    token = _current.set(Trajectory(messages, tools) if messages is not None else None)
    tools_token = _tools.set(tools)
    try:
        yield
    finally:
        _tools.reset(tools_token)
        _current.reset(token)


def inherit(item: VerifyItem) -> VerifyItem:
    """A nested item that scores the running item's response (a spec's component, an appeal, a hybrid judge's rule
    pass) carries its trajectory and tool specs too, so a nested judge still sees the conversation and a nested
    tool-call check the specs."""
    running, tools = current(), current_tools()
    if item.messages is not None or (running is None and (tools is None or item.tools is not None)):
        return item
    if running is None:
        return replace(item, tools=tools)
    return replace(item, messages=running.messages, tools=running.tools)
