"""A fast path for the LaTeX parser: simple scalar answers built into the very tree latex2sympy would build.

Why: latex2sympy's ANTLR parser costs ~30 ms on the first parse of each distinct string, and most answers that reach
the symbolic step are simple scalars (``11\\sqrt{5} + 11``, ``\\frac{20000}{\\pi}``, ``1 - 12i``). This module reads
a deliberately RESTRICTED grammar with a small recursive-descent parser and returns None for anything outside it,
so the caller falls back to latex2sympy unchanged.

The grammar: integers, decimals, ``\\frac{a}{b}`` (``\\dfrac``/``\\tfrac`` arrive as ``\\frac`` after the library's
normalisation, which the caller applies first), ``\\sqrt{x}``, ``\\sqrt[n]{x}``, ``\\pi``, ``i``, ``+``, ``-``,
unary signs, implicit multiplication, ``*``/``\\cdot``/``\\times``, ``/``/``\\div``, small integer powers
(``^k``, ``^{k}``, ``^{-k}``) and parentheses. No letters but ``i``, no functions, sets, commas, relations, text.

Faithfulness is the whole point (a different tree could change a verdict), so every node is built with the same
sympy constructors and the same quirks as latex2sympy2_extended's converter: unevaluated ``Add``/``Mul``/``Pow``
flattened one level, integer quotients as ``Rational``, a sign folded into a number, and an integer followed by a
positive rational read as a mixed number (``2\\frac{1}{2}`` is 5/2, so ``2(3)`` is 5). Inputs whose reading by the
ANTLR grammar is ambiguous or odd are refused instead of imitated: two numbers in a row, ``\\pi(...)``/``i(...)``
(the grammar reads a function call), brace or bracket groups. ``tests/test_math_fastparse.py`` checks the trees
against latex2sympy's on real answers and generated expressions.
"""
from __future__ import annotations

import re

import sympy

MAX_NUMBER_DIGITS = 80
MAX_EXPONENT = 100  # |k| in x^k; larger powers go to the full parser (and its size guards)

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?|\.\d+)|\\(?P<cmd>[A-Za-z]+)|(?P<i>i)(?![A-Za-z])|(?P<op>[-+*/()^{}\[\]]))"
)
_COMMANDS = {"frac": "frac", "sqrt": "sqrt", "pi": "pi", "cdot": "mul", "times": "mul", "div": "div"}
_ATOM_START = frozenset({"num", "i", "pi", "frac", "sqrt", "("})


class _Refuse(Exception):
    """The text is outside the fast grammar (not an error: the full parser decides)."""


def _tokens(text: str) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if not m:
            return None
        pos = m.end()
        if m.group("num") is not None:
            out.append(("num", m.group("num")))
        elif m.group("cmd") is not None:
            kind = _COMMANDS.get(m.group("cmd"))
            if kind is None:
                return None
            out.append((kind, m.group("cmd")))
        elif m.group("i") is not None:
            out.append(("i", "i"))
        else:
            op = m.group("op")
            out.append(({"*": "mul", "/": "div"}.get(op, op), op))
    return out


def _is_number(expr: sympy.Basic) -> bool:
    return bool(getattr(expr, "func", None) is not None and expr.func.is_Number) or bool(expr.is_Number)


def _flat(op: type, lh: sympy.Basic, rh: sympy.Basic) -> sympy.Basic:
    """``op(lh, rh)`` unevaluated, splicing the arguments of an operand that already is ``op`` (one level)."""
    kind = "is_Add" if op is sympy.Add else "is_Mul"
    if getattr(lh, kind) or getattr(rh, kind):
        args = (list(lh.args) if getattr(lh, kind) else [lh]) + (list(rh.args) if getattr(rh, kind) else [rh])
        return op(*args, evaluate=False)
    return op(lh, rh, evaluate=False)


def _quotient(top: sympy.Basic, bottom: sympy.Basic) -> sympy.Basic:
    if top.is_Integer and bottom.is_Integer:
        return sympy.Rational(top, bottom)
    return sympy.Mul(top, sympy.Pow(bottom, -1, evaluate=False), evaluate=False)


def _number(text: str) -> sympy.Basic:
    if len(text) > MAX_NUMBER_DIGITS:
        raise _Refuse
    # What latex2sympy's ``sympy.Number(text)`` yields (via sympify), built without going through sympify.
    return sympy.Integer(int(text)) if text.isdigit() else sympy.Float(text)


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def take(self, kind: str) -> str:
        if self.peek() != kind:
            raise _Refuse
        self.pos += 1
        return self.tokens[self.pos - 1][1]

    def expr(self) -> sympy.Basic:
        lh = self.product()
        while self.peek() in ("+", "-"):
            sign = self.take(self.peek())  # type: ignore[arg-type]
            rh = self.product()
            if sign == "-":
                rh = -rh if _is_number(rh) else _flat(sympy.Mul, sympy.Integer(-1), rh)
            lh = _flat(sympy.Add, lh, rh)
        return lh

    def product(self) -> sympy.Basic:
        lh = self.unary()
        while self.peek() in ("mul", "div"):
            kind = self.peek()
            self.pos += 1
            rh = self.unary()
            lh = _flat(sympy.Mul, lh, rh) if kind == "mul" else _quotient(lh, rh)
        return lh

    def unary(self) -> sympy.Basic:
        if self.peek() == "+":
            self.pos += 1
            return self.unary()
        if self.peek() == "-":
            self.pos += 1
            inner = self.unary()
            return -inner if _is_number(inner) else _flat(sympy.Mul, sympy.Integer(-1), inner)
        items = [self.power()]
        while self.peek() in _ATOM_START:
            if items and self.peek() == "num" and self.tokens[self.pos - 1][0] == "num":
                raise _Refuse  # "1 2": the grammar reads a mixed number
            items.append(self.power())
        if self.peek() in ("{", "["):
            raise _Refuse
        return _juxtapose(items)

    def power(self) -> sympy.Basic:
        base = self.atom()
        named = self.tokens[self.pos - 1][0] in ("i", "pi")
        while self.peek() == "^":
            self.pos += 1
            base = sympy.Pow(base, self.exponent(), evaluate=False)
        if named and self.peek() == "(":
            raise _Refuse  # "\pi(2)" is a function call in the grammar
        return base

    def exponent(self) -> sympy.Basic:
        if self.peek() == "num":
            value = _number(self.take("num"))
        else:
            self.take("{")
            value = self.expr()
            self.take("}")
        if not value.is_Integer or abs(value) > MAX_EXPONENT:
            raise _Refuse
        return value

    def braced(self) -> sympy.Basic:
        self.take("{")
        value = self.expr()
        self.take("}")
        return value

    def atom(self) -> sympy.Basic:
        kind = self.peek()
        if kind == "num":
            return _number(self.take("num"))
        if kind == "i":
            self.pos += 1
            return sympy.Symbol("i", real=None)
        if kind == "pi":
            self.pos += 1
            return sympy.pi
        if kind == "(":
            self.pos += 1
            value = self.expr()
            self.take(")")
            return value
        if kind == "frac":
            self.pos += 1
            top = self.braced()
            return _quotient(top, self.braced())
        if kind == "sqrt":
            self.pos += 1
            root = None
            if self.peek() == "[":
                self.pos += 1
                root = self.expr()
                self.take("]")
                if not root.is_Integer or not 2 <= root <= MAX_EXPONENT:
                    raise _Refuse
            base = self.braced()
            return sympy.Pow(base, sympy.S.Half if root is None else 1 / root, evaluate=False)
        raise _Refuse


def _juxtapose(items: list[sympy.Basic]) -> sympy.Basic:
    """Implicit multiplication, right to left; an integer then a positive rational is a mixed number."""
    first = items[0]
    if len(items) == 1:
        return first
    rest = _juxtapose(items[1:])
    if first.is_Integer and rest.is_Rational and rest.p > 0 and rest.q > 0:
        numerator = first * rest.q - rest.p if first < 0 else first * rest.q + rest.p
        return sympy.Rational(numerator, rest.q)
    return _flat(sympy.Mul, first, rest)


def fast_parse(normalized: str) -> sympy.Basic | None:
    """The tree latex2sympy builds for ``normalized`` (text already through its normalisation), or None when the
    text is outside the restricted grammar. ``i`` stays the symbol ``i``, exactly as latex2sympy returns it."""
    tokens = _tokens(normalized)
    if not tokens:
        return None
    parser = _Parser(tokens)
    try:
        value = parser.expr()
    except _Refuse:
        return None
    return value if parser.pos == len(tokens) else None
