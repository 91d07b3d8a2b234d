"""The part of a model's output a rule reward reads, and the values written in it.

R1-style models put their working in ``<think>`` and the answer in ``<answer>`` tags (VLM-R1, UI-R1, GUI-R1,
Search-R1 all prompt for that shape); others answer in plain text or a fenced JSON block. A rule reward reads the
answer only: numbers in the reasoning are not the answer, and a box the model considered and dropped must not count.
"""
from __future__ import annotations

import ast
import json
import re
from typing import Any

from verifiers.types import Verdict

_THINK_END = re.compile(r"</think\s*>", re.IGNORECASE)
_ANSWER = re.compile(r"<answer\s*>(.*?)(?:</answer\s*>|$)", re.IGNORECASE | re.DOTALL)
_FENCE_LANG = re.compile(r"[a-zA-Z0-9_-]{0,20}[ \t]*\n?")
# Chat-template markers a generation can end with; they are not part of the answer.
_TEMPLATE_TAIL = re.compile(r"(?:<\|im_end\|>|<\|eot_id\|>|<\|endoftext\|>|</s>|<eos>|<\|end\|>)\s*$")


def answer_text(response: str) -> str:
    """The answer region: after the last ``</think>``, inside the last ``<answer>`` block when there is one."""
    text = _THINK_END.split(response)[-1]
    blocks = _ANSWER.findall(text)
    if blocks:
        text = blocks[-1]
    while (m := _TEMPLATE_TAIL.search(text)) is not None:
        text = text[: m.start()]
    return text.strip()


def answer_blocks(response: str) -> list[str]:
    """Every ``<answer>`` block after the reasoning (several different ones are a hedge); [] when there is none."""
    text = _THINK_END.split(response)[-1]
    return [b.strip() for b in _ANSWER.findall(text)]


def loads_lenient(text: str) -> Any:
    """A JSON value, or a Python literal as models often write it (single quotes, True/None, tuples); None if
    neither. ``ast.literal_eval`` builds only literals, and the text is bounded by the caller."""
    text = text.strip()
    if not text or len(text) > 200_000:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def structured_values(text: str) -> list[Any]:
    """JSON or literal values found in the answer: the whole text, fenced blocks, then each bracketed span that parses.

    Returned outermost first, so a list of objects is read as one value rather than as its members.
    """
    whole = loads_lenient(text)
    if whole is not None and not isinstance(whole, (int, float, str)):
        return [whole]
    found: list[Any] = []
    for block in fenced(text):
        value = loads_lenient(block)
        if value is not None and not isinstance(value, (int, float, str)):
            found.append(value)
    if found:
        return found
    return [v for v in _bracketed(text) if not isinstance(v, (int, float, str))]


def fenced(text: str) -> list[str]:
    """The contents of closed ``` fences (a split, so an unclosed fence costs one pass, not one per marker)."""
    pieces = text.split("```")
    blocks = pieces[1:-1:2] if len(pieces) % 2 else pieces[1:-2:2]
    return [b[m.end():] if (m := _FENCE_LANG.match(b)) else b for b in blocks]


def _bracketed(text: str) -> list[Any]:
    """Outermost balanced ``[...]`` / ``{...}`` spans that parse as values, left to right (linear scan)."""
    out: list[Any] = []
    depth, start, opener = 0, -1, ""
    pairs = {"[": "]", "{": "}"}
    in_string: str | None = None
    for i, ch in enumerate(text):
        if in_string:
            if ch == in_string and text[i - 1] != "\\":
                in_string = None
            continue
        if depth and ch in "\"'":
            in_string = ch
        elif ch in pairs and (depth == 0 or ch == opener):
            if depth == 0:
                start, opener = i, ch
            depth += 1
        elif depth and ch == pairs[opener]:
            depth -= 1
            if depth == 0:
                value = loads_lenient(text[start : i + 1])
                if value is not None:
                    out.append(value)
        if len(out) >= 256:
            break
    return out


# Bounded repeats keep every pattern built on it linear: an unbounded digit run retried from each of its positions
# is quadratic on a long run of digits.
NUMBER = r"(?<![\d.])[-+]?(?:\d{1,15}(?:\.\d{0,15})?|\.\d{1,15})(?:[eE][-+]?\d{1,3})?"
# Bounded white space between tokens, for the same reason (adjacent unbounded \s* runs backtrack quadratically).
SP = r"\s{0,16}"


def metric_verdict(measured: float, label: str, threshold: float | None, **details: Any) -> Verdict:
    """A metric's verdict: the value clipped to [0, 1] (float sums can land a hair outside), or 1/0 at a threshold."""
    value = max(0.0, min(1.0, measured))
    if threshold is None:
        return Verdict.ok(value, f"{label} {value:.3f}", **details)
    passed = value >= threshold
    return Verdict.ok(1.0 if passed else 0.0, f"{label} {value:.3f} {'>=' if passed else '<'} {threshold}", **details)
