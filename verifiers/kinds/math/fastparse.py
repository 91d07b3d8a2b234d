"""A fast path for the LaTeX parser: common answers built into the very tree latex2sympy would build.

Why: latex2sympy's ANTLR parser spends 5-300 ms on a fresh answer (its adaptive prediction builds DFA states, and
full-context predictions are never cached), while the answers that reach the symbolic step are mostly short:
``11\\sqrt{5} + 11``, ``6r^2-4r-24``, ``y = 2x + 3``, ``(-\\infty, 0] \\cup [1, \\infty)``, ``\\{1\\pm\\sqrt{5},-2\\}``,
a pmatrix. This module reads a deliberately RESTRICTED grammar with a small recursive-descent parser over the
tokens of latex2sympy's own lexer (so numbers, letters, differentials and commands are split exactly as the full
parser splits them), and returns None for anything outside it, so the caller falls back to latex2sympy unchanged.

The grammar, on the text after the library's normalisation (which the caller applies first):
- expressions: numbers, single letters and Greek commands with optional subscripts (``e``, ``I`` and
  ``d``-differentials are refused), ``\\sin``…``\\cot``, ``\\ln`` and ``\\log`` with an optional power
  (``\\sin^2 x``, ``\\tan^{-1}(1)``) and their argument in parentheses or bare (``\\sin 2x``, ending before the
  next function), ``\\infty``, ``\\frac{a}{b}``, ``\\sqrt{x}``, ``\\sqrt[n]{x}``, ``+ - * / \\cdot \\times \\div``,
  implicit multiplication, unary signs, one power per base (``^k``, ``^x``, ``^{expr}``) and parentheses;
- elements: an expression, ``a \\pm b`` / ``\\pm b``, one relation chain (``= < > \\le \\ge \\ne``), ``x \\in S``,
  intervals and tuples in ``()``/``[]``, ``\\{...\\}`` sets and their ``\\cup`` unions; several comma-separated
  elements make a set;
- a lone ``pmatrix``/``bmatrix`` of expressions.

Faithfulness is the whole point (a different tree could change a verdict), so every node is built with the same
sympy constructors, helpers (``get_symbol``, latex2sympy's ``FiniteSet`` and ``And``) and quirks as
latex2sympy2_extended's converter: unevaluated ``Add``/``Mul``/``Pow`` flattened one level, integer quotients as
``Rational``, a sign folded into a number, an integer followed by a positive rational read as a mixed number
(``2\\frac{1}{2}`` is 5/2), ``(2, 1)`` read as a pair because it is an empty interval, ``x \\in S`` as ``Eq(x, S)``.
Inputs whose reading by the ANTLR grammar is ambiguous or odd are refused instead of imitated: two numbers in a row,
a letter or Greek command before ``(`` (the grammar reads a function call), chained powers, ``\\pm`` inside brackets,
a relation among several elements. ``tests/verifiers/math/test_math_fastparse.py`` checks the trees against
latex2sympy's on real answers and on generated expressions of every construct.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import sympy
import sympy.functions.elementary.trigonometric as sympy_trig
from antlr4 import InputStream
from antlr4.error.ErrorListener import ErrorListener
from latex2sympy2_extended.antlr_parser import PSLexer
from latex2sympy2_extended.logic import And
from latex2sympy2_extended.sets import FiniteSet
from latex2sympy2_extended.symbols import get_symbol

# The converter release whose trees this module imitates (checked by tests/verifiers/math/test_math_fastparse.py);
# under any other release the fast path stays off and every answer goes to latex2sympy.
VERIFIED_CONVERTER = "1.11."
ENABLED = version("latex2sympy2_extended").startswith(VERIFIED_CONVERTER)

MAX_NUMBER_DIGITS = 80
MAX_EXPONENT = 10_000  # |k| in x^k; larger powers go to the full parser (the size guards run after either parser)
MAX_TOKENS = 400

# latex2sympy's own test for "1,000": the whole text is one number with thousands separators.
_COMMA_NUMBER = re.compile(r"^\s*-?\d{1,3}(,\d{3})+(\.\d+)?\s*$")

_KINDS = {
    PSLexer.NUMBER: "num", PSLexer.LETTER_NO_E: "letter", PSLexer.GREEK_CMD: "greek", PSLexer.SYMBOL: "symbol",
    PSLexer.ADD: "+", PSLexer.SUB: "-", PSLexer.MUL: "mul", PSLexer.CMD_TIMES: "mul", PSLexer.CMD_CDOT: "mul",
    PSLexer.DIV: "div", PSLexer.CMD_DIV: "div", PSLexer.L_PAREN: "(", PSLexer.R_PAREN: ")", PSLexer.L_BRACE: "{",
    PSLexer.R_BRACE: "}", PSLexer.L_BRACKET: "[", PSLexer.R_BRACKET: "]", PSLexer.CARET: "^", PSLexer.CMD_FRAC: "frac",
    PSLexer.FUNC_SQRT: "sqrt", PSLexer.COMMA: ",", PSLexer.PLUS_MINUS: "pm", PSLexer.IN: "in", PSLexer.UNION: "cup",
    PSLexer.L_BRACE_VISUAL: "set(", PSLexer.R_BRACE_VISUAL: "set)", PSLexer.CMD_MATRIX_START: "matrix(",
    PSLexer.CMD_MATRIX_END: "matrix)", PSLexer.MATRIX_DEL_ROW: "row", PSLexer.MATRIX_DEL_COL: "col",
    PSLexer.ASSIGNMENT: "rel", PSLexer.LT: "rel", PSLexer.LTE: "rel", PSLexer.GT: "rel", PSLexer.GTE: "rel",
    PSLexer.UNEQUAL: "rel", PSLexer.UNDERSCORE: "_", PSLexer.FUNC_SIN: "func", PSLexer.FUNC_COS: "func",
    PSLexer.FUNC_TAN: "func", PSLexer.FUNC_CSC: "func", PSLexer.FUNC_SEC: "func", PSLexer.FUNC_COT: "func",
    PSLexer.FUNC_LN: "func", PSLexer.FUNC_LOG: "func",
}
_RELATIONS = {
    PSLexer.ASSIGNMENT: sympy.Eq, PSLexer.LT: sympy.StrictLessThan, PSLexer.LTE: sympy.LessThan,
    PSLexer.GT: sympy.StrictGreaterThan, PSLexer.GTE: sympy.GreaterThan, PSLexer.UNEQUAL: sympy.Ne,
}
_MATRIX_STARTS = frozenset({"\\begin{pmatrix}", "\\begin{bmatrix}"})
_ATOM_START = frozenset({"num", "letter", "greek", "symbol", "frac", "sqrt", "(", "func"})
_LOG_BASES = {"ln": sympy.E, "log": 10}


class _Refuse(Exception):
    """The text is outside the fast grammar (not an error: the full parser decides)."""


class _Raise(ErrorListener):  # type: ignore[misc]  # antlr4 ships no type stubs: ErrorListener is Any
    def syntaxError(self, recognizer: Any, offendingSymbol: Any, line: int, column: int, msg: str,
                    e: Any) -> None:
        raise _Refuse


_RAISE = _Raise()


def _tokens(text: str) -> list[tuple[str, int, str]]:
    """(kind, ANTLR type, text) of every token, from latex2sympy's lexer; refuses unknown kinds and lexer errors."""
    lexer = PSLexer(InputStream(text))
    lexer.removeErrorListeners()
    lexer.addErrorListener(_RAISE)
    out: list[tuple[str, int, str]] = []
    while True:
        token = lexer.nextToken()
        if token.type == -1:
            return out
        kind = _KINDS.get(token.type)
        if kind is None or len(out) >= MAX_TOKENS:
            raise _Refuse
        if kind == "letter" and token.text == "I":
            raise _Refuse  # the converter returns the imaginary unit and drops any power on it
        if kind == "symbol" and token.text != "\\infty":
            raise _Refuse
        if kind == "frac" and token.text != "\\frac":
            raise _Refuse
        out.append((kind, token.type, token.text))


def _is_number(expr: sympy.Basic) -> bool:
    return bool(getattr(expr, "func", None) is not None and expr.func.is_Number) or bool(expr.is_Number)


def _flat(op: type, lh: sympy.Basic, rh: sympy.Basic) -> sympy.Basic:
    """``op(lh, rh)`` unevaluated, splicing the arguments of an operand that already is ``op`` (one level)."""
    kind = "is_Add" if op is sympy.Add else "is_Mul"
    if getattr(lh, kind) or getattr(rh, kind):
        args = (list(lh.args) if getattr(lh, kind) else [lh]) + (list(rh.args) if getattr(rh, kind) else [rh])
        return op(*args, evaluate=False)
    return op(lh, rh, evaluate=False)


def _negate(expr: sympy.Basic) -> sympy.Basic:
    return -expr if _is_number(expr) else _flat(sympy.Mul, sympy.Integer(-1), expr)


def _quotient(top: sympy.Basic, bottom: sympy.Basic) -> sympy.Basic:
    if top.is_Integer and bottom.is_Integer:
        return sympy.Rational(top, bottom)
    return sympy.Mul(top, sympy.Pow(bottom, -1, evaluate=False), evaluate=False)


def _as_unary_minus(expr: sympy.Basic) -> sympy.Basic:
    """The converter's minus for ``\\pm`` (not the one of unary ``-``: it does not flatten)."""
    if expr.is_Rational:
        return sympy.Rational(-expr.p, expr.q)
    return sympy.Mul(-1, expr, evaluate=False)


def _number(text: str) -> sympy.Basic:
    if len(text) > MAX_NUMBER_DIGITS:
        raise _Refuse
    # What latex2sympy's ``sympy.Number(text)`` yields (via sympify), built without going through sympify.
    return sympy.Integer(int(text)) if text.isdigit() else sympy.Float(text)


def _interval(left: sympy.Basic, right: sympy.Basic, left_open: bool, right_open: bool) -> sympy.Basic:
    """latex2sympy's ``convert_interval``: an empty interval is read as a pair."""
    try:
        if (left_open and right_open and right <= left) or (not left_open and not right_open and right < left):
            return sympy.Tuple(left, right)
    except Exception:
        pass
    try:
        return sympy.Interval(left, right, left_open=left_open, right_open=right_open)
    except Exception:
        raise _Refuse from None


class _Parser:
    def __init__(self, tokens: list[tuple[str, int, str]]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.nofunc = False  # inside a function's argument written without parentheses ("\\sin 2x")

    def scoped(self, nofunc: bool, parse: Callable[[], sympy.Basic]) -> sympy.Basic:
        """Parse with ``nofunc`` set: off inside a bracket or brace group (functions are allowed again), on in a
        function's bare argument."""
        saved, self.nofunc = self.nofunc, nofunc
        try:
            return parse()
        finally:
            self.nofunc = saved

    def peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def take_next(self) -> str:
        """The next token's text, whatever its kind (the caller has peeked at it)."""
        kind = self.peek()
        if kind is None:
            raise _Refuse
        return self.take(kind)

    def take(self, kind: str) -> str:
        if self.peek() != kind:
            raise _Refuse
        self.pos += 1
        return self.tokens[self.pos - 1][2]

    # --- top level: a matrix, or comma-separated elements --------------------------------------------------------

    def top(self) -> sympy.Basic:
        if self.peek() == "matrix(":
            return self.matrix()
        elements: list[list[sympy.Basic]] = [self.element()]
        while self.peek() == ",":
            self.pos += 1
            elements.append(self.element())
        if len(elements) > 1 and any(
            isinstance(e, (sympy.Rel, sympy.And, sympy.Union)) for group in elements for e in group
        ):
            raise _Refuse  # "x = 1, 2" is Eq(x, {1, 2}) to the grammar
        flat = [e for group in elements for e in group]
        return flat[0] if len(flat) == 1 else FiniteSet(*flat)

    def element(self) -> list[sympy.Basic]:
        """One comma-separated element: a list, because ``a \\pm b`` is two values."""
        if self.peek() == "pm":
            self.pos += 1
            value = self.expr()
            return [_as_unary_minus(value), value]
        if self.peek() in ("(", "[", "set(") and self._bracket_has_comma():
            return [self.set_expression()]
        start = self.pos
        first = self.expr()
        kind = self.peek()
        if kind == "pm":
            self.pos += 1
            second = self.expr()
            if self.peek() == "pm":
                raise _Refuse
            return [sympy.Add(first, second, evaluate=False), sympy.Add(first, _as_unary_minus(second), evaluate=False)]
        if kind == "rel":
            return [self.relation(first)]
        if kind == "in":
            if not (first.is_Symbol and start == 0 and self.pos == 1):
                raise _Refuse  # the left side must be one letter for the grammar's set relation
            self.pos += 1
            if self.peek() not in ("(", "[", "set(") or not self._bracket_has_comma():
                raise _Refuse
            return [sympy.Eq(first, self.set_expression(), evaluate=False)]  # interpret_contains_as_eq
        return [first]

    def relation(self, first: sympy.Basic) -> sympy.Basic:
        lh: sympy.Basic = first
        while self.peek() == "rel":
            op = _RELATIONS[self.tokens[self.pos][1]]
            self.pos += 1
            rh = self.expr()
            if self.peek() in ("pm", "in"):
                raise _Refuse
            if isinstance(lh, And):
                lh = And(*lh._unsorted_args, op(lh._unsorted_args[-1].rhs, rh, evaluate=False))
            elif isinstance(lh, sympy.core.relational.Relational):
                lh = And(lh, op(lh.rhs, rh, evaluate=False))
            else:
                lh = op(lh, rh, evaluate=False)
        return lh

    def _bracket_has_comma(self) -> bool:
        """Whether the bracket opening here is a set, interval or tuple: ``\\{...\\}`` or a comma at its depth."""
        depth = 0
        for kind, _, _ in self.tokens[self.pos:]:
            if kind in ("(", "[", "{", "set("):
                depth += 1
            elif kind in (")", "]", "}", "set)"):
                depth -= 1
                if depth == 0:
                    return self.peek() == "set("
            elif kind == "," and depth == 1:
                return True
        return False

    def set_expression(self) -> sympy.Basic:
        """A set atom, or a ``\\cup`` union of set atoms (left to right, tuples read as finite sets)."""
        value = self.set_atom()
        while self.peek() == "cup":
            self.pos += 1
            right = self.set_atom()
            left = FiniteSet(*value) if isinstance(value, sympy.Tuple) else value
            right = FiniteSet(*right) if isinstance(right, sympy.Tuple) else right
            value = sympy.Union(left, right, evaluate=False)
        if self.peek() not in (None, ","):
            raise _Refuse
        return value

    def set_atom(self) -> sympy.Basic:
        opening = self.peek()
        if opening == "set(":
            self.pos += 1
            items = self.element()
            while self.peek() == ",":
                self.pos += 1
                items += self.element()
            self.take("set)")
            if any(isinstance(e, (sympy.Rel, sympy.And, sympy.Set, sympy.Tuple)) for e in items):
                raise _Refuse
            return FiniteSet(*items)
        if opening not in ("(", "["):
            raise _Refuse
        self.pos += 1
        items = [self.expr()]
        while self.peek() == ",":
            self.pos += 1
            items.append(self.expr())
        closing = self.peek()
        if closing not in (")", "]"):
            raise _Refuse
        self.pos += 1
        if len(items) == 2:
            return _interval(items[0], items[1], opening == "(", closing == ")")
        if (opening, closing) not in (("(", ")"), ("[", "]")):
            raise _Refuse
        return sympy.Tuple(*items)

    def matrix(self) -> sympy.Basic:
        if self.tokens[self.pos][2] not in _MATRIX_STARTS:
            raise _Refuse
        self.pos += 1
        rows = [[self.expr()]]
        while self.peek() in ("col", "row"):
            if self.take_next() == "&":
                rows[-1].append(self.expr())
            else:
                rows.append([self.expr()])
        self.take("matrix)")
        if len({len(r) for r in rows}) != 1:
            raise _Refuse
        return sympy.Matrix(rows)

    # --- expressions ---------------------------------------------------------------------------------------------

    def expr(self) -> sympy.Basic:
        lh = self.product()
        while self.peek() in ("+", "-"):
            sign = self.take_next()
            rh = self.product()
            lh = _flat(sympy.Add, lh, _negate(rh) if sign == "-" else rh)
        return lh

    def product(self) -> sympy.Basic:
        lh = self.unary()
        while self.peek() in ("mul", "div"):
            kind = self.peek()
            self.pos += 1
            if self.nofunc and self.peek() in ("func", "sqrt"):
                raise _Refuse  # "\\sin x \\cdot \\cos x" is sin(x cos x) to the grammar
            rh = self.unary()
            lh = _flat(sympy.Mul, lh, rh) if kind == "mul" else _quotient(lh, rh)
        return lh

    def unary(self) -> sympy.Basic:
        if self.peek() == "+":
            self.pos += 1
            return self.unary()
        if self.peek() == "-":
            self.pos += 1
            return _negate(self.unary())
        if self.nofunc and self.peek() in ("func", "sqrt"):
            raise _Refuse  # "\\sin \\sqrt{2}": where the bare argument ends is the grammar's own business
        items = [self.power()]
        while self.peek() in _ATOM_START:
            if self.nofunc and self.peek() in ("func", "sqrt"):
                break  # "\\sin x \\cos x": the bare argument ends before the next function
            if self.peek() == "num" and self.tokens[self.pos - 1][0] == "num":
                raise _Refuse  # "1 2": the grammar reads a mixed number
            items.append(self.power())
        if self.peek() in ("{", "["):
            raise _Refuse
        return _juxtapose(items)

    def power(self) -> sympy.Basic:
        start = self.peek()
        base = self.atom()
        if self.peek() == "^":
            self.pos += 1
            base = sympy.Pow(base, self.exponent(), evaluate=False)
            if self.peek() == "^":
                raise _Refuse  # chained powers associate differently for letters and numbers
        if start in ("letter", "greek") and self.peek() == "(":
            raise _Refuse  # "f(x)", "\pi(2)": the grammar reads a function call
        return base

    def exponent(self) -> sympy.Basic:
        kind = self.peek()
        if kind == "num":
            text = self.take("num")
            if not text.isdigit():
                raise _Refuse
            value = _number(text)
        elif kind in ("letter", "greek"):
            value = get_symbol(self.take(kind), None, True)
            if self.peek() in ("(", "_"):
                raise _Refuse
            return value
        else:
            self.take("{")
            value = self.expr()
            self.take("}")
            if value.free_symbols:
                return value
        if not value.is_Integer or abs(value) > MAX_EXPONENT:
            raise _Refuse
        return value

    def braced(self) -> sympy.Basic:
        self.take("{")
        value = self.scoped(False, self.expr)
        self.take("}")
        return value

    def subscript(self) -> str:
        """``_1``, ``_{n+1}``: the converter names the symbol by the subscript's token texts, joined."""
        self.take("_")
        if self.peek() in ("num", "letter", "greek"):
            text = self.tokens[self.pos][2]
            self.pos += 1
        else:
            start = self.pos + 1
            self.braced()  # the subscript must be an expression the grammar reads
            text = "".join(t[2] for t in self.tokens[start:self.pos - 1])
        if self.peek() == "_":
            raise _Refuse
        return f"_{{{text}}}" if len(text) > 1 else f"_{text}"

    def function(self) -> sympy.Basic:
        """``\\sin x``, ``\\sin^2(2x)``, ``\\ln 2``: the argument in parentheses, or bare (a product, no function)."""
        name = self.take("func")[1:]
        power = None
        if self.peek() == "^":
            self.pos += 1
            power = self.exponent()
        if self.peek() in ("_", "{", None) or (power is not None and name in _LOG_BASES):
            raise _Refuse  # "\\log_2 8", "\\sin{x}", a bare "\\sin"
        if self.peek() == "(":
            self.pos += 1
            arg = self.scoped(False, self.expr)
            self.take(")")
            if power is not None and self.peek() == "^":
                raise _Refuse  # "\\sin^2(x)^3": two powers on one function
        else:
            arg = self.scoped(True, self.product)
        return _function_node(name, arg, power)

    def atom(self) -> sympy.Basic:
        kind = self.peek()
        if kind == "num":
            return _number(self.take("num"))
        if kind in ("letter", "greek"):
            name = self.take(kind)
            if self.peek() == "_":
                name += self.subscript()
            return get_symbol(name, None, True)
        if kind == "symbol":
            self.pos += 1
            return sympy.oo
        if kind == "(":
            self.pos += 1
            value = self.scoped(False, self.expr)
            self.take(")")
            return value
        if kind == "func":
            return self.function()
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


def _function_node(name: str, arg: sympy.Basic, power: sympy.Basic | None) -> sympy.Basic:
    """The converter's node for ``\\sin``…``\\cot``, ``\\ln``, ``\\log``; ``^{-1}`` on a trig function is its
    inverse."""
    if name in _LOG_BASES:
        expr = sympy.log(arg, _LOG_BASES[name], evaluate=False)
    else:
        if power == -1:
            name, power = "a" + name, None
        expr = getattr(sympy_trig, name)(arg, evaluate=False)
    return sympy.Pow(expr, power, evaluate=False) if power else expr


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
    if not ENABLED or not normalized.strip() or _COMMA_NUMBER.match(normalized):
        return None
    try:
        tokens = _tokens(normalized)
        if not tokens:
            return None
        parser = _Parser(tokens)
        value = parser.top()
    except _Refuse:
        return None
    except Exception:
        return None  # either way the full parser decides, which is the contract of this module
    return value if parser.pos == len(tokens) else None
