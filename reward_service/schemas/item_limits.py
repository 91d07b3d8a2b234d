"""The limits of a verify request, checked at the edge in one place so a hostile item is a 4xx naming its field
instead of work for a verifier: the batch's size, each item's lengths (response, reference, options, tools, ids, a
conversation's messages), numbers a verifier cannot print or compare (an integer of thousands of digits, ``1e999``
parsed as infinity, ``NaN``), nesting, lone surrogates, and a conversation's shape (each tool result answering an
earlier call, an assistant turn to score).

Each JSON-valued field is written as compact JSON once, by orjson (a BFCL item's tool specs in well under a
microsecond, several times faster than the json module), and the size and nesting checks read that text at C speed:
its length bounds the size as the json module writes it (never more than three times longer: a space after each
separator, a six-character escape for a character of two or three UTF-8 bytes, twelve for one of four), so the exact
size is counted only for a field near its limit; brackets outside strings give the nesting. The rarer checks the raw
body did not clear (surrogates, odd numbers) read the field's ASCII JSON text, written only then; a field walks its
values in Python only when a text says it may fail a check, to name where."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import Request
from fastapi.requests import HTTPConnection

from reward_service.errors import ApiError
from reward_service.schemas.verify import VerifyItemIn, VerifyRequest
from reward_service.settings import LimitsSettings

_SURROGATE = re.compile("[\ud800-\udfff]")
# In JSON text written with ASCII escapes every surrogate, paired or lone, is a \udXXX escape; in a raw body a lone
# one may also come as its UTF-8-like bytes (Python's json decodes them with surrogatepass).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_RAW_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")
MAX_NESTING = 64  # lists/objects inside a reference, options or tools; deeper is never a real gold answer or spec


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


def _ascii_json(value: Any) -> str | None:
    """The value as JSON with ASCII escapes, as ``json_chars`` counts it (every surrogate then shows as an escape),
    or None when it cannot be written."""
    try:
        return json.dumps(value)
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


def may_hold_surrogate(raw: bytes) -> bool:
    """Whether a raw JSON body may decode to a surrogate: only through a \\udXXX escape or a surrogate's own bytes
    (two searches; the alternation of both in one pattern is ten times slower)."""
    return bool(_SURROGATE_ESCAPE_BYTES.search(raw)) or (b"\xed" in raw and bool(_RAW_SURROGATE.search(raw)))


async def reject_lone_surrogates(connection: HTTPConnection) -> None:
    """Every JSON body, on every route: a lone UTF-16 surrogate is a 422 naming where it is. FastAPI has parsed the
    body already (``request.json()`` is cached), so this costs one walk over it. A WebSocket has no body here."""
    if not isinstance(connection, Request):
        return
    request = connection
    if request.method not in ("POST", "PUT", "PATCH") or "json" not in request.headers.get("content-type", ""):
        return
    if not may_hold_surrogate(await request.body()):
        return
    try:
        body = await request.json()
    except Exception:  # not JSON: the route's own parsing says so
        return
    bad = surrogate_path(body)
    if bad is not None:
        raise ApiError(422, f"{json_path(bad)} holds a lone UTF-16 surrogate, which is not valid Unicode text; "
                            "encode the text as UTF-8", loc=bad)


def number_problem(value: Any, max_digits: int, text: str | None = None) -> tuple[tuple[Any, ...], str] | None:
    """The path of the first number that is not finite or has more than ``max_digits`` digits, and what is wrong
    (``text``: the value's JSON, when the caller has written it already)."""
    if isinstance(value, str) or value is None:
        return None
    if isinstance(value, (dict, list)):  # neither can hide from a container's JSON text: one scan may skip the walk
        text = text if text is not None else _as_json(value)
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


def _compact(value: Any) -> bytes | None:
    """The value as compact UTF-8 JSON, or None when orjson cannot write it (an integer past 64 bits, a lone
    surrogate, nesting past its limit): the checks then fall back to the json module's text or a walk."""
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return None


def size_over(value: Any, limit: int, compact: bytes | None = None) -> int | None:
    """The value's size as JSON text (``json_chars``) when it is over ``limit``, else None; ``compact``: its
    ``_compact`` text, whose length times three bounds that size, so most values are never written twice."""
    if compact is not None and 3 * len(compact) <= limit:
        return None
    size = json_chars(value)
    return size if size > limit else None


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_LEAF = re.compile(rb"\[\]|\{\}")


def nesting_depth(value: Any) -> int:
    """How deep lists and objects nest in a JSON value, without recursion (a hostile body can nest thousands deep)."""
    if not isinstance(value, (list, dict)):
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack:  # only containers are pushed: scalars (most of a body) cost one isinstance each
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node)
                     if isinstance(v, (list, dict)))
    return deepest


def too_deep(value: Any, text: bytes | None) -> int | None:
    """The value's nesting when it is over ``MAX_NESTING``, else None. From its JSON text (``_compact``'s): fewer
    brackets than the limit cannot nest past it; else the brackets outside strings, with the empty pairs taken out
    once per level (each pass in C), leave nothing within the limit. Only a value over the limit is walked, to say
    how deep."""
    if not isinstance(value, (list, dict)):
        return None
    if text is not None:
        if text.count(b"[") + text.count(b"{") <= MAX_NESTING:
            return None
        brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", text))
        for _ in range(MAX_NESTING):
            brackets = _LEAF.sub(b"", brackets)
            if not brackets:
                return None
    depth = nesting_depth(value)
    return depth if depth > MAX_NESTING else None


def _surrogate_in(value: Any, text: str | None) -> list[Any] | None:
    if isinstance(value, str):
        return [] if _SURROGATE.search(value) else None
    if text is not None and not _SURROGATE_ESCAPE.search(text):
        return None
    return surrogate_path(value) if isinstance(value, (dict, list)) else None


@dataclass(frozen=True)
class BodyFacts:
    """What the raw request body says about every value in it, read once at C speed: a check that the body clears
    is skipped for each item. A body that does not clear a check (or no body: a caller with parsed items only) has
    each item's fields checked one by one, so the answer names the field either way. Nesting is not among them: a
    field's own brackets are counted from its JSON text."""

    surrogates: bool = True  # a lone surrogate may hide in it
    odd_numbers: bool = True  # NaN, Infinity, a long run of digits or a three-digit exponent: a number to check

    @classmethod
    def of(cls, raw: bytes, max_digits: int) -> BodyFacts:
        # Each test is a byte translation or a substring search (a regular expression is tried only where a cheap
        # test found something). The numbers: a float overflows to infinity with 309 digits before its point, or
        # fewer with an exponent; under 100 the exponent has two digits and 210 digits are needed: a run of 200
        # digits, or an exponent of three, catches every overflow.
        surrogates = may_hold_surrogate(raw)
        shape = raw.translate(_NUMBER_SHAPE)
        odd = (b"NaN" in raw or b"Infinity" in raw or b"0" * min(max_digits + 1, 200) in shape
               or b"e000" in shape or b"e+000" in shape)
        return cls(surrogates, odd)


_NUMBER_SHAPE = bytes.maketrans(b"0123456789eE+-", b"0000000000ee++")
_UNCHECKED = BodyFacts()


def check_limits(limits: LimitsSettings, body: VerifyRequest, facts: BodyFacts = _UNCHECKED) -> None:
    """The batch and each item within the configured limits (413/422 naming the offending field); ``facts``: what
    the raw body already cleared (``BodyFacts.of``)."""
    n = len(body.items)
    if n == 0:
        raise ApiError(422, "items must hold at least one item", loc=["items"])
    if n > limits.max_batch_items:
        raise ApiError(413, f"batch of {n} items exceeds the limit of {limits.max_batch_items}; split it",
                       loc=["items"])
    for i, item in enumerate(body.items):
        check_item(limits, i, item, facts)


def check_item(limits: LimitsSettings, i: int, item: VerifyItemIn, facts: BodyFacts = _UNCHECKED) -> None:
    """One item within the limits: each JSON field (reference, options, tools) is written as compact text once, for
    its size and nesting, and as ASCII JSON only when the body did not clear surrogates or numbers; then its ids and
    its conversation."""
    fields = (("reference", item.reference), ("options", item.options), ("tools", item.tools))
    compact = [_compact(v) if isinstance(v, (dict, list)) and v else None for _, v in fields]
    for (name, value), compact_text in zip(fields, compact):
        depth = too_deep(value, compact_text)
        if depth is not None:
            raise ApiError(422, f"items[{i}].{name} is nested {depth} levels deep, over the limit of "
                                f"{MAX_NESTING}", loc=["items", i, name])
    texts: list[str | None] = [None, None, None]
    if facts.surrogates or facts.odd_numbers:  # rare: these read the ASCII JSON text
        texts = [_ascii_json(v) if isinstance(v, (dict, list)) and v else None for _, v in fields]
    if facts.surrogates:
        for name, value, text in (("response", item.response, None), ("reference", item.reference, texts[0]),
                                  ("id", item.id, None), ("group", item.group, None),
                                  ("options", item.options, texts[1])):
            at = _surrogate_in(value, text)
            if at is not None:
                bad = [name, *at]
                raise ApiError(422, f"items[{i}].{'.'.join(map(str, bad))} holds a lone UTF-16 surrogate, which "
                                    "is not valid Unicode text; encode the text as UTF-8", loc=["items", i, *bad])
    if item.response is not None and len(item.response) > limits.max_response_chars:
        raise ApiError(413, f"items[{i}].response has {len(item.response)} characters, over the limit of "
                            f"{limits.max_response_chars}", loc=["items", i, "response"])
    reference = item.reference
    if reference is not None and not isinstance(reference, (int, float, bool)):
        size = size_over(reference, limits.max_reference_chars, compact[0])
        if size is not None:
            raise ApiError(413, f"items[{i}].reference is {size} characters, over the limit of "
                                f"{limits.max_reference_chars}", loc=["items", i, "reference"])
    for name, value in (("id", item.id), ("group", item.group)):
        if value is not None and len(value) > limits.max_id_chars:
            raise ApiError(422, f"items[{i}].{name} has {len(value)} characters, over the limit of "
                                f"{limits.max_id_chars}", loc=["items", i, name])
    if item.options and (size := size_over(item.options, limits.max_options_chars, compact[1])) is not None:
        raise ApiError(413, f"items[{i}].options is {size} characters, over the limit of {limits.max_options_chars}",
                       loc=["items", i, "options"])
    if facts.odd_numbers:
        for (name, value), text in zip(fields, texts):
            problem = number_problem(value, limits.max_number_digits, text)
            if problem is not None:
                path, what = problem
                raise ApiError(422, f"items[{i}].{'.'.join(map(str, (name, *path)))} {what}",
                               loc=["items", i, name, *path])
    if item.tools is not None:
        check_tools(limits, i, item.tools, compact[2])
    messages = item.message_dicts()
    if messages is not None:
        check_conversation(limits, i, messages)


def check_tools(limits: LimitsSettings, i: int, tools: list[dict[str, Any]], compact: bytes | None = None) -> None:
    """An item's tool specs within their size limit (with a plain response as with messages)."""
    size = size_over(tools, limits.max_tools_chars, compact if compact is not None else _compact(tools))
    if size is not None:
        raise ApiError(422, f"items[{i}].tools is {size} characters, over the limit of {limits.max_tools_chars}",
                       loc=["items", i, "tools"])


def check_conversation(limits: LimitsSettings, i: int, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]] | None = None) -> None:
    """A trajectory's size within the limits, each tool result answering an earlier call, and an assistant turn to
    score (422 naming the item and field). The message shapes are the schema's (``reward_service.schemas.verify``):
    what an assistant turn holds is the model's output and is never refused here (an empty turn, a call without an
    id, name or readable arguments is scored)."""
    where = ["items", i, "messages"]
    if len(messages) > limits.max_messages:
        raise ApiError(422, f"items[{i}].messages has {len(messages)} messages, over the limit of "
                            f"{limits.max_messages}", loc=where)
    if (size := size_over(messages, limits.max_messages_chars, _compact(messages))) is not None:
        raise ApiError(422, f"items[{i}].messages is {size} characters, over the limit of "
                            f"{limits.max_messages_chars}", loc=where)
    if tools is not None:
        check_tools(limits, i, tools)
    calls: set[Any] = set()
    for j, message in enumerate(messages):
        if message["role"] == "assistant":
            calls.update(call.get("id") for call in message.get("tool_calls") or ())
        elif message["role"] == "tool" and message["tool_call_id"] not in calls:
            raise ApiError(422, f"items[{i}].messages[{j}].tool_call_id {message['tool_call_id'][:100]!r} answers "
                                "no earlier assistant tool call", loc=[*where, j, "tool_call_id"])
    if not any(m["role"] == "assistant" for m in messages):
        raise ApiError(422, f"items[{i}].messages holds no assistant turn: nothing to score", loc=where)
