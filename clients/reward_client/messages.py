"""Trainers' chat messages in the service's shape (OpenAI chat messages).

Trainers write tool-calling conversations in their chat templates' shape, not OpenAI's: TRL and verl give a tool
call's ``arguments`` as a dict and may leave out call ids; TRL's tool results carry the tool's ``name`` instead of
a ``tool_call_id``; multimodal parts (images) sit among text parts. ``openai_messages`` writes such a conversation
the way ``/v1/verify`` takes it, keeping what the model wrote.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

_KEEP = {
    "system": ("role", "content", "name"),
    "user": ("role", "content", "name"),
    "assistant": ("role", "content", "name", "tool_calls", "reasoning_content"),
    "tool": ("role", "content", "name", "tool_call_id"),
}


def is_conversation(value: Any) -> bool:
    """A list of chat messages (dicts with a role), as trainers hand conversational prompts and completions."""
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(m, Mapping) and "role" in m for m in value)


def _content(content: Any) -> Any:
    """Text parts kept (a trajectory is scored on its text), other parts (images, audio) left out."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = [{"type": "text", "text": str(p.get("text", ""))} for p in content
                 if isinstance(p, Mapping) and p.get("type", "text") == "text"]
        return parts or ""
    return str(content)


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # nested past what JSON writes: unreadable arguments, scored as such
        return "<arguments that cannot be written as JSON>"


def openai_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with string arguments, an id on every tool call and a ``tool_call_id`` on every tool result
    (a result without one answers the first call of the last assistant turn not yet answered, of its ``name`` when it
    has one); ``developer`` turns are system turns; null fields and keys the service does not read are left out."""
    out: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []  # (id, name) of the calls of the last assistant turn not yet answered
    for turn, message in enumerate(messages):
        role = str(message.get("role", ""))
        role = "system" if role == "developer" else role
        m: dict[str, Any] = {k: message[k] for k in _KEEP.get(role, ("role", "content"))
                             if message.get(k) is not None}
        m["role"] = role
        if "content" in m or role != "assistant":
            m["content"] = _content(m.get("content"))
        if role == "assistant":
            pending = []
            calls = []
            for k, call in enumerate(m.pop("tool_calls", None) or ()):
                # whatever the model wrote is kept for the server to score: a call that is not an object, a
                # function without a name, arguments that are not JSON
                call = call if isinstance(call, Mapping) else {}
                function: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), Mapping) else {}
                call_id = str(call.get("id") or f"call_{turn}_{k}")
                name = str(function.get("name") or "")
                calls.append({"id": call_id, "type": "function",
                              "function": {"name": name, "arguments": _arguments(function.get("arguments"))}})
                pending.append((call_id, name))
            if calls:
                m["tool_calls"] = calls
                m.setdefault("content", None)
            elif m.get("content") is None:
                m["content"] = ""
        elif role == "tool":
            if "tool_call_id" not in m:
                match = next((p for p in pending if p[1] == m.get("name")), pending[0] if pending else None)
                if match is not None:
                    m["tool_call_id"] = match[0]
            pending = [p for p in pending if p[0] != m.get("tool_call_id")]
        out.append(m)
    return out
