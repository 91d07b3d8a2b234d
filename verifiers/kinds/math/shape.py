"""Recognise compound answers (tuples, intervals, unions of intervals, matrices) without the LaTeX parser.

latex2sympy spends 30-200 ms on a cold ``\\left( \\frac{3}{2}, -13 \\right)`` or a pmatrix, mostly to learn that it
is a tuple; against a single-valued gold that shape alone decides "not equal". The grammar here is deliberately
narrow (numbers, fractions, roots, pi, infinity, single-letter symbols): whatever it accepts, the parser reads as the
same shape, which tests/verifiers/math/test_math_shape.py checks against the parser on real answers.
"""
from __future__ import annotations

import re

from verifiers.kinds.math.numeric import parse_number

_LEFT_RIGHT = re.compile(r"\\(?:left|right)\s*(?=[()\[\]])")
_ATOM = r"(?:\d+(?:\.\d+)?|\\pi|\\infty|\\sqrt\s*\{[0-9a-z+\-*/^ ]+\}|\\sqrt\s*\d|[a-z](?![a-zA-Z]))"
_TERM = rf"(?:{_ATOM}(?:\s*\^\s*(?:\d|\{{-?\d+\}}))?)"
_FRAC = rf"\\[dt]?frac\s*\{{\s*-?\s*{_TERM}(?:\s*[+\-]\s*{_TERM})*\s*\}}\s*\{{\s*{_TERM}(?:\s*[+\-]\s*{_TERM})*\s*\}}"
_FACTOR = rf"(?:{_FRAC}|{_TERM})"
_PRODUCT = rf"(?:{_FACTOR}(?:\s*(?:\\cdot\s*|/\s*)?{_FACTOR})*)"
_ELEMENT = re.compile(rf"\s*[+\-]?\s*{_PRODUCT}(?:\s*[+\-]\s*{_PRODUCT})*\s*")
_PAIR = re.compile(r"^\s*([(\[])(.*)([)\]])\s*$", re.DOTALL)
_MATRIX = re.compile(r"^\s*\\begin\{([pb]matrix)\}(.*)\\end\{\1\}\s*$", re.DOTALL)


def _elements_ok(parts: list[str]) -> bool:
    return all(_ELEMENT.fullmatch(p) for p in parts)


def _bracketed(text: str) -> bool:
    """``(a, b)``, ``[a, b)``, ``(a, b, c)`` with every element in the narrow grammar."""
    m = _PAIR.match(text)
    if not m or any(c in m.group(2) for c in "()[]"):
        return False
    parts = m.group(2).split(",")
    if len(parts) < 2:
        return False
    if len(parts) > 2 and (m.group(1), m.group(3)) != ("(", ")"):
        return False
    if (m.group(1), m.group(3)) != ("(", ")") and not _distinct_ends(parts):
        return False  # [1, 1] is the set {1}, which the parser reads as the single value 1
    return _elements_ok(parts)


def _distinct_ends(parts: list[str]) -> bool:
    """Ends of a closed interval that certainly differ: an infinity, or two different numbers."""
    if any("\\infty" in p for p in parts):
        return True
    values = [parse_number(p.strip()) for p in parts]
    present = [v for v in values if v is not None]
    return len(present) == len(values) and present[0].value != present[1].value


def compound_shape(text: str) -> str | None:
    """``"tuple or interval"``, ``"union"`` or ``"matrix"`` when the answer certainly is one, else None."""
    s = _LEFT_RIGHT.sub("", text).strip()
    if _bracketed(s):
        return "tuple or interval"
    if "\\cup" in s:
        pieces = s.split("\\cup")
        if all(_bracketed(p) and (m := _PAIR.match(p)) is not None and m.group(2).count(",") == 1 for p in pieces):
            return "union"
        return None
    m = _MATRIX.match(s)
    if m and "&" not in m.group(2):
        rows = [r for r in re.split(r"\\\\", m.group(2))]
        if len(rows) >= 2 and _elements_ok(rows):
            return "matrix"
    return None
