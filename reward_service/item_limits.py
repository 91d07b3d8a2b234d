"""Size limits on the values inside one verify item, checked at the edge so a hostile item is a 4xx naming its field
instead of work for a verifier: numbers a verifier cannot print or compare (an integer of thousands of digits,
``1e999`` parsed as infinity, ``NaN``), and lengths of ids and options."""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any


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


def number_problem(value: Any, max_digits: int) -> tuple[tuple[Any, ...], str] | None:
    """The path of the first number that is not finite or has more than ``max_digits`` digits, and what is wrong."""
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
