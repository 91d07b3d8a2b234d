"""Size limits on the values inside one verify item, checked at the edge so a hostile item is a 4xx naming its field
instead of work for a verifier: numbers a verifier cannot print or compare (an integer of thousands of digits,
``1e999`` parsed as infinity, ``NaN``), and lengths of ids and options."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from fastapi.requests import HTTPConnection

from reward_service.errors import ApiError
from reward_service.settings import LimitsSettings

_SURROGATE = re.compile("[\ud800-\udfff]")


def json_nodes(value: Any) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """Every value inside a parsed JSON value with its path, without recursion (bodies may nest deeply)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, at = stack.pop()
        yield node, at
        if isinstance(node, dict):
            stack.extend((v, (*at, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*at, j)) for j, v in enumerate(node))


def _as_json(value: Any) -> str | None:
    """The value as JSON text (non-ASCII kept), or None when it cannot be written (nested past the recursion limit,
    an integer past Python's int-to-text limit): the walks below then look at every node."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return None


def surrogate_path(value: Any) -> list[Any] | None:
    """Where a lone surrogate sits in a JSON value (it decodes from "\\ud800" but cannot be encoded back, so any
    answer echoing it would fail as a 500), or None: the key itself when a key holds one."""
    if isinstance(value, (dict, list)):  # a container: one C-speed scan of its text clears the common case
        text = _as_json(value)
        if text is not None and not _SURROGATE.search(text):
            return None
    for node, at in json_nodes(value):
        if isinstance(node, str) and _SURROGATE.search(node):
            return list(at)
        if isinstance(node, dict):
            for key in node:
                if isinstance(key, str) and _SURROGATE.search(key):
                    return [*at, key.encode("utf-8", "backslashreplace").decode()]
    return None


def json_path(at: list[Any]) -> str:
    """``items[3].reference`` from ["items", 3, "reference"]."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in at).lstrip(".") or "the body"


async def reject_lone_surrogates(connection: HTTPConnection) -> None:
    """Every JSON body, on every route: a lone UTF-16 surrogate is a 422 naming where it is. FastAPI has parsed the
    body already (``request.json()`` is cached), so this costs one walk over it. A WebSocket has no body here."""
    if not isinstance(connection, Request):
        return
    request = connection
    if request.method not in ("POST", "PUT", "PATCH") or "json" not in request.headers.get("content-type", ""):
        return
    try:
        body = await request.json()
    except Exception:  # not JSON: the route's own parsing says so
        return
    bad = surrogate_path(body)
    if bad is not None:
        raise ApiError(422, f"{json_path(bad)} holds a lone UTF-16 surrogate, which is not valid Unicode text; "
                            "encode the text as UTF-8", loc=bad)


def number_problem(value: Any, max_digits: int) -> tuple[tuple[Any, ...], str] | None:
    """The path of the first number that is not finite or has more than ``max_digits`` digits, and what is wrong."""
    if isinstance(value, str) or value is None:
        return None
    if isinstance(value, (dict, list)):  # neither can hide from a container's JSON text: one scan may skip the walk
        text = _as_json(value)
        if text is not None and "NaN" not in text and "Infinity" not in text and not re.search(
                rf"\d{{{max_digits + 1}}}", text):
            return None
    for node, at in json_nodes(value):
        if isinstance(node, bool):
            continue
        if isinstance(node, float) and not math.isfinite(node):
            return at, "is not a finite number (a JSON number this large overflows; NaN and Infinity are not JSON)"
        if isinstance(node, int) and _digits(node) > max_digits:
            return at, f"is an integer of more than {max_digits} digits; send such a value as a string"
    return None


def _digits(n: int) -> int:
    try:
        return len(str(abs(n)))
    except ValueError:  # past Python's int-to-text limit (4,300 digits): certainly too many
        return 1 << 30


def json_chars(value: Any) -> int:
    """Characters of a value as the JSON a client sent (strings count as their length)."""
    return len(value) if isinstance(value, str) else len(json.dumps(value))


def check_conversation(limits: LimitsSettings, i: int, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]] | None) -> None:
    """A trajectory's size within the limits, each tool result answering an earlier call, and an assistant turn to
    score (422 naming the item and field). The message shapes are the schema's (``reward_service.schemas.verify``)."""
    where = ["items", i, "messages"]
    if len(messages) > limits.max_messages:
        raise ApiError(422, f"items[{i}].messages has {len(messages)} messages, over the limit of "
                            f"{limits.max_messages}", loc=where)
    if (size := json_chars(messages)) > limits.max_messages_chars:
        raise ApiError(422, f"items[{i}].messages is {size} characters, over the limit of "
                            f"{limits.max_messages_chars}", loc=where)
    if tools is not None and (size := json_chars(tools)) > limits.max_tools_chars:
        raise ApiError(422, f"items[{i}].tools is {size} characters, over the limit of {limits.max_tools_chars}",
                       loc=["items", i, "tools"])
    calls: set[str] = set()
    for j, message in enumerate(messages):
        if message["role"] == "assistant":
            calls.update(call["id"] for call in message.get("tool_calls") or ())
        elif message["role"] == "tool" and message["tool_call_id"] not in calls:
            raise ApiError(422, f"items[{i}].messages[{j}].tool_call_id {message['tool_call_id'][:100]!r} answers "
                                "no earlier assistant tool call", loc=[*where, j, "tool_call_id"])
    if not any(m["role"] == "assistant" for m in messages):
        raise ApiError(422, f"items[{i}].messages holds no assistant turn: nothing to score", loc=where)
