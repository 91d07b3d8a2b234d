"""Compare a program's stdout with the expected output: exact, tokens or float (with a tolerance).

``exact`` still forgives what no judge counts as a difference: CRLF vs LF, trailing spaces at line ends and
trailing blank lines (the usual online-judge rule). ``float`` compares token by token, numbers within an absolute
or relative tolerance, everything else exactly.
"""
from __future__ import annotations

import math


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if not math.isnan(value) else None


def outputs_match(got: str, expected: str, compare: str = "tokens", tolerance: float = 1e-6) -> bool:
    if compare == "exact":
        return _lines(got) == _lines(expected)
    got_tokens, want_tokens = got.split(), expected.split()
    if compare == "tokens":
        return got_tokens == want_tokens
    if len(got_tokens) != len(want_tokens):
        return False
    for g, w in zip(got_tokens, want_tokens):
        if g == w:
            continue
        gv, wv = _number(g), _number(w)
        if gv is None or wv is None or not math.isclose(gv, wv, rel_tol=tolerance, abs_tol=tolerance):
            return False
    return True


def describe_mismatch(got: str, expected: str, limit: int = 120) -> str:
    """First differing line, trimmed, so a trainer can show the model what went wrong."""
    got_lines, want_lines = _lines(got), _lines(expected)
    for index in range(max(len(got_lines), len(want_lines))):
        g = got_lines[index] if index < len(got_lines) else "<missing>"
        w = want_lines[index] if index < len(want_lines) else "<missing>"
        if g != w:
            return f"line {index + 1}: got {g[:limit]!r}, expected {w[:limit]!r}"
    return "output differs in whitespace only"
