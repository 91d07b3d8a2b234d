"""The symbolic path: LaTeX → sympy (math-verify's own parser, latex2sympy2_extended) and structural equivalence.

Why our own comparison instead of ``math_verify.verify``: its numeric shortcut rounds to a few digits, which accepts
``1/2004!`` for ``1/2006!`` and treats two different line equations as equal. Here:
- numbers without symbols are compared at 60 significant digits (exact forms must agree to 1e-40 relative;
  ``rel_tol`` only applies when the answer itself was written with decimals);
- expressions with symbols are compared at several test points with every symbol positive (so ``\\sqrt{1/n}`` and
  ``1/\\sqrt{n}`` agree, as they do on the domain a math answer means), falling back to sympy only when a point
  cannot be evaluated;
- equations compare their solved side when both are ``symbol = ...`` (``y=2x+1`` vs ``y=3x+1`` differ), otherwise
  ``lhs - rhs`` must be proportional by a nonzero constant (``2x+2y=2`` is ``x+y=1``);
- sets are order-free, tuples and matrices ordered, intervals compare endpoints and openness.
The parser never calls ``eval``/``sympify`` on raw text; sizes are checked by ``guards`` before any evaluation.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable

import sympy
from latex2sympy2_extended import latex2sympy
from latex2sympy2_extended.math_normalization import NormalizationConfig, normalize_latex
from sympy.core.function import AppliedUndef
from sympy.matrices.expressions.matexpr import MatrixExpr
from sympy.matrices.matrixbase import MatrixBase

from verifiers.kinds.math.fastparse import fast_parse
from verifiers.kinds.math.guards import (
    MAX_EXACT_DIGITS,
    MAX_MATRIX_ENTRIES,
    MAX_MATRIX_POWER,
    MAX_SIMPLIFY_OPS,
    UNBOUNDED_OPERATORS,
    TooLarge,
    check_evaluable,
    check_size,
)
from verifiers.kinds.math.normalize import is_prose, plain_to_latex, strip_decorations

_PREC = 60
_EXACT_TOL = sympy.Float("1e-40", _PREC)
_TEST_POINTS = (
    (sympy.Rational(7, 5), sympy.Rational(13, 7), sympy.Rational(5, 3), sympy.Rational(11, 4)),
    (sympy.Rational(3, 10), sympy.Rational(29, 9), sympy.Rational(9, 11), sympy.Rational(17, 13)),
    (sympy.Rational(47, 8), sympy.Rational(2, 9), sympy.Rational(31, 6), sympy.Rational(4, 5)),
)
# Functions constant between integers: small fractional test points cannot tell floor(n/2) from floor(sqrt(n-1)),
# so expressions with them are also compared at larger integers.
_STEP_FUNCTIONS = (sympy.floor, sympy.ceiling, sympy.frac, sympy.Mod, sympy.factorial, sympy.binomial)
_INTEGER_POINTS = tuple(tuple(sympy.Integer(v) for v in row)
                        for row in ((7, 12, 5, 9), (23, 17, 31, 4), (50, 41, 13, 28)))
_NORMALIZATION = NormalizationConfig(
    basic_latex=True, units=True, malformed_operators=True, nits=True, boxed="all", equations=False
)
MAX_PARSE_CHARS = 600


class ParseError(Exception):
    """The text is not a math expression the LaTeX parser can read."""


def _prepare(text: str) -> str:
    s = strip_decorations(text)
    s = plain_to_latex(s)
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*\{([^{}]*)\}\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    return s


@functools.lru_cache(maxsize=8192)
def parse_latex(text: str) -> sympy.Basic:
    """Parse one answer (LaTeX or plain text) into sympy, unevaluated where evaluation could be expensive.

    Simple scalars take ``fastparse`` (the same tree in microseconds instead of ~30 ms of ANTLR); everything else,
    and anything that grammar refuses, goes through latex2sympy.
    """
    s = _prepare(text)
    if not s or len(s) > MAX_PARSE_CHARS:
        raise ParseError("empty or too long to parse" if s else "empty")
    if is_prose(s):
        raise ParseError("the answer is prose, not a math expression")
    s = _expand_nested_pm(s)
    expr = fast_parse(normalize_latex(s, _NORMALIZATION))
    return _imaginary(_explicit_matrix(expr if expr is not None else parse_full(s)))


def _explicit_matrix(expr: sympy.Basic) -> sympy.Basic:
    """An answer left as a sum, difference, scalar multiple, product or small power of written-out matrices
    ("The sum is $A + B$" with A and B spelled out) as the matrix it evaluates to. Only when every operand is an
    explicit matrix of at most ``MAX_MATRIX_ENTRIES`` entries whose values pass the size guard, so evaluating is
    cheap and bounded; anything else stays as it is (and compares unequal to a matrix)."""
    if not isinstance(expr, (MatrixExpr, sympy.Pow)) or isinstance(expr, MatrixBase):
        return expr
    if isinstance(expr, sympy.Pow):
        base, power = expr.args
        if not (isinstance(base, MatrixBase) and power.is_Integer and 1 <= int(power) <= MAX_MATRIX_POWER):
            return expr
    operands = [a for a in sympy.preorder_traversal(expr) if isinstance(a, MatrixBase)]
    if not operands or any(len(m) > MAX_MATRIX_ENTRIES for m in operands) or expr.free_symbols - set().union(
            *(m.free_symbols for m in operands)):
        return expr  # a named matrix ("A + B" with A unknown) cannot be evaluated
    power = int(expr.args[1]) if isinstance(expr, sympy.Pow) else 1
    try:
        # exact arithmetic on the entries: a product's or power's entries grow with the number of factors
        if max(check_size(entry) for m in operands for entry in m) * power * len(operands) > MAX_EXACT_DIGITS:
            return expr
        value = expr.doit() if power == 1 else expr.args[0] ** power
    except (TooLarge, TypeError, ValueError, sympy.ShapeError):
        return expr
    return sympy.ImmutableMatrix(value) if isinstance(value, MatrixBase) else expr


_PM = re.compile(r"\\(?:pm|mp)(?![A-Za-z])")
_FUNCTION_VALUE = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?\s*\([^()=]*\)\s*=\s*")  # "W(x) = "


def _expand_nested_pm(s: str) -> str:
    """``\\frac{-1 \\pm \\sqrt{5}}{2}`` as the two values it writes (``..+.., ..-..``): the LaTeX parser reads ``\\pm``
    only at the outer level. Only one sign, no commas (so never inside a set or tuple), and only inside a group, or
    right after the ``=`` of a function's value (``W(x) = \\pm 1``, which the parser cannot read: ``y = \\pm 1`` it
    reads as the value set {-1, 1})."""
    signs = list(_PM.finditer(s))
    if len(signs) != 1 or "," in s:
        return s
    at = signs[0].start()
    depth = 0
    for k, c in enumerate(s[:at]):
        if c in "{(" and (k == 0 or s[k - 1] != "\\"):
            depth += 1
        elif c in "})" and (k == 0 or s[k - 1] != "\\"):
            depth -= 1
    if depth <= 0 and not _FUNCTION_VALUE.fullmatch(s[:at]):
        return s
    plus = "-" if signs[0].group(0) == "\\mp" else "+"
    minus = "+" if plus == "-" else "-"
    end = signs[0].end()
    return f"{s[:at]}{plus}{s[end:]}, {s[:at]}{minus}{s[end:]}"


def parse_full(prepared: str) -> sympy.Basic:
    """latex2sympy on a ``_prepare``d answer (before the ``i`` → imaginary-unit step)."""
    try:
        expr = latex2sympy(prepared, normalization_config=_NORMALIZATION)
    except Exception as exc:  # the parser raises bare Exceptions for syntax errors
        raise ParseError(str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__) from None
    if expr is None or isinstance(expr, str):
        raise ParseError("no expression")
    if isinstance(expr, (list, tuple)):
        expr = sympy.FiniteSet(*expr) if len(expr) > 1 else expr[0]
    return expr


def _imaginary(expr: sympy.Basic) -> sympy.Basic:
    """The symbol ``i`` is the imaginary unit in a final answer (``6-5i``)."""
    i = sympy.Symbol("i")
    if getattr(expr, "free_symbols", None) and i in expr.free_symbols:
        try:
            check_size(expr)
        except TooLarge:
            return expr
        try:
            return expr.xreplace({i: sympy.I})
        except (ValueError, TypeError):  # e.g. an interval cannot have a complex end: ``i`` stays a letter there
            return expr
    return expr


def is_multi_valued(expr: sympy.Basic) -> bool:
    """A set of several values (a bare list, ``\\pm``, "a or b"): several answers when one was asked for."""
    return isinstance(expr, sympy.FiniteSet) and len(expr) > 1


# --- comparison ---------------------------------------------------------------------------------------------------

Compare = Callable[[sympy.Basic, sympy.Basic], bool]


def _has_float(expr: sympy.Basic) -> bool:
    return any(isinstance(a, sympy.Float) for a in sympy.preorder_traversal(expr))


def _close(a: sympy.Basic, b: sympy.Basic, tol: sympy.Float) -> bool | None:
    """Numerical closeness of two evaluated values; None when either is not a finite number."""
    if not (a.is_number and b.is_number):
        return None
    if a.has(sympy.zoo, sympy.nan) or b.has(sympy.zoo, sympy.nan):
        return None
    if a.has(sympy.oo, -sympy.oo) or b.has(sympy.oo, -sympy.oo):
        return bool(a == b)
    diff = abs(sympy.N(a - b, _PREC))
    scale = max(abs(sympy.N(a, _PREC)), abs(sympy.N(b, _PREC)), sympy.Float("1e-30"))
    return bool(diff <= tol * scale)


def _evaluate(expr: sympy.Basic, point: dict[sympy.Symbol, sympy.Rational] | None) -> sympy.Basic:
    value = expr.evalf(_PREC, subs=point) if point else expr.evalf(_PREC)
    return value


def _functions_as_symbols(*exprs: sympy.Basic) -> list[sympy.Basic]:
    """Applications of unknown functions (``q(5)``, ``f(x)``) as plain symbols named by what they write, so
    ``q(5) + 5`` and ``5 + q(5)`` compare by value like any expression in unknowns."""
    calls = set().union(*(e.atoms(AppliedUndef) for e in exprs))
    if not calls:
        return list(exprs)
    names = {c: sympy.Symbol(f"__fn_{sympy.srepr(c)}", positive=True) for c in calls}
    return [e.xreplace(names) for e in exprs]


def exprs_equal(gold: sympy.Basic, pred: sympy.Basic, rel_tol: float) -> bool:
    """Two scalar expressions (numbers or formulas in the same symbols) have the same value."""
    if gold == pred:
        return True
    gold, pred = _functions_as_symbols(gold, pred)
    g_syms, p_syms = gold.free_symbols, pred.free_symbols
    if g_syms != p_syms:
        return False
    check_evaluable(gold, pred)
    g_size, p_size = check_size(gold), check_size(pred)
    tol = sympy.Float(rel_tol, _PREC) if (_has_float(gold) or _has_float(pred)) else _EXACT_TOL
    if not g_syms:
        if g_size <= MAX_EXACT_DIGITS and p_size <= MAX_EXACT_DIGITS:
            g_ex, p_ex = _exact_rational(gold), _exact_rational(pred)
            if g_ex is not None and p_ex is not None:
                return bool(g_ex == p_ex)
        close = _close(_evaluate(gold, None), _evaluate(pred, None), tol)
        return bool(close)
    symbols = sorted(g_syms, key=lambda s: s.name)
    if len(symbols) > len(_TEST_POINTS[0]):
        return _structural(gold, pred)
    decided = 0
    points = _TEST_POINTS + (_INTEGER_POINTS if (gold.has(*_STEP_FUNCTIONS) or pred.has(*_STEP_FUNCTIONS)) else ())
    for values in points:
        point = dict(zip(symbols, values))
        close = _close(_evaluate(gold, point), _evaluate(pred, point), tol)
        if close is False:
            return False
        if close is True:
            decided += 1
    return decided >= 2 or (decided == 0 and _structural(gold, pred))


def _exact_rational(expr: sympy.Basic) -> sympy.Rational | None:
    """The exact rational value of a size-checked, symbol-free expression (``1/2004!``); None if not rational."""
    if _has_float(expr):
        return None
    try:
        value = expr.doit()
    except Exception:
        return None
    return value if value.is_Rational else None


def _structural(gold: sympy.Basic, pred: sympy.Basic) -> bool:
    """Last resort for expressions with unknown functions: sympy's own simplification of the difference, only on
    trees small enough for it (``MAX_SIMPLIFY_OPS``; a larger difference is not proven zero)."""
    try:
        difference = gold - pred
        return bool(sympy.count_ops(difference) <= MAX_SIMPLIFY_OPS and sympy.simplify(difference) == 0)
    except Exception:
        return False


def _match_unordered(gold: list[sympy.Basic], pred: list[sympy.Basic], eq: Compare) -> bool:
    if len(gold) != len(pred):
        return False
    remaining = list(pred)
    for g in gold:
        for k, p in enumerate(remaining):
            if eq(g, p):
                del remaining[k]
                break
        else:
            return False
    return True


def _match_ordered(gold: list[sympy.Basic], pred: list[sympy.Basic], eq: Compare) -> bool:
    return len(gold) == len(pred) and all(eq(g, p) for g, p in zip(gold, pred))


def _as_pair(expr: sympy.Basic) -> list[sympy.Basic] | None:
    """``(a, b)`` is written the same as an open interval and a pair; compare them as a pair."""
    if isinstance(expr, sympy.Interval) and expr.left_open and expr.right_open:
        return [expr.start, expr.end]
    if isinstance(expr, sympy.Tuple) and len(expr) == 2:
        return list(expr)
    return None


def _scalar(expr: sympy.Basic) -> bool:
    """A scalar expression. sympy's immutable matrices are ``Expr`` too, but ``x - Matrix`` raises ``TypeError``:
    arithmetic between the two sides of a comparison is only done on scalars."""
    return isinstance(expr, sympy.Expr) and not isinstance(expr, MatrixBase)


def _names_something(side: sympy.Basic) -> bool:
    """``x``, ``f(x)``/``p(x, y)``, or a quantity written with letters only (``AB``, ``|AB|``, ``x + y``): the side an
    answer names its value by. A side with a number in it (``2x``) is a formula, not a name."""
    if isinstance(side, sympy.Symbol) or (
        isinstance(side, AppliedUndef) and all(isinstance(a, sympy.Symbol) for a in side.args)
    ):
        return True
    return (_scalar(side) and bool(side.free_symbols)
            and not any(a.is_Number and abs(a) != 1 for a in side.atoms(sympy.Number)))


def _solved_side(expr: sympy.Basic) -> tuple[sympy.Basic, sympy.Basic] | None:
    """``x = value``, ``f(x) = formula`` (also ``value = x``) as (name, value); None for other equations."""
    if not isinstance(expr, sympy.Equality):
        return None
    lhs, rhs = expr.args
    for name, value in ((lhs, rhs), (rhs, lhs)):
        if not (isinstance(name, (sympy.Symbol, AppliedUndef)) or not getattr(value, "free_symbols", True)):
            continue  # a name made of several letters only names a number (|AB| = 1), never a formula
        if _names_something(name) and not value.has(name) and not (
            isinstance(name, AppliedUndef) and value.has(name.func)
        ):
            return name, value
    return None


def _same_name(a: sympy.Basic, b: sympy.Basic) -> dict[sympy.Basic, sympy.Basic] | None:
    """When ``b`` names the same thing as ``a``, the renaming of ``b``'s variables that makes them equal: ``f(n)``
    and ``f(m)`` both name the function f (``f(n) = 2n + 1`` is ``f(m) = 2m + 1``); None otherwise."""
    if a == b:
        return {}
    if isinstance(a, AppliedUndef) and isinstance(b, AppliedUndef) and a.func == b.func and len(a.args) == len(b.args):
        if len(set(b.args)) == len(b.args):
            return dict(zip(b.args, a.args))
    return None


def _proportional(a: sympy.Basic, b: sympy.Basic, positive: bool) -> bool:
    """``a = k·b`` for one nonzero constant k (k > 0 when ``positive``), tested at the shared test points."""
    syms = sorted(a.free_symbols | b.free_symbols, key=lambda s: s.name)
    check_evaluable(a, b)
    if a.free_symbols != b.free_symbols or not syms or len(syms) > len(_TEST_POINTS[0]):
        return _structural(a, b)
    check_size(a), check_size(b)
    ratios = []
    for values in _TEST_POINTS:
        point = dict(zip(syms, values))
        av, bv = _evaluate(a, point), _evaluate(b, point)
        if not (av.is_number and bv.is_number) or bv == 0 or av == 0:
            if (av == 0) != (bv == 0):
                return False
            continue
        ratios.append(sympy.N(av / bv, _PREC))
    if len(ratios) < 2:
        return False
    k = ratios[0]
    if k == 0 or (positive and not k > 0):
        return False
    return all(_close(r, k, _EXACT_TOL) for r in ratios[1:])


def _relation_parts(rel: sympy.Basic) -> tuple[sympy.Basic, bool]:
    """``a < b`` and ``b > a`` as (b - a, strict): "this quantity is positive (or nonnegative)"."""
    if isinstance(rel, (sympy.StrictLessThan, sympy.LessThan)):
        return rel.rhs - rel.lhs, isinstance(rel, sympy.StrictLessThan)
    return rel.lhs - rel.rhs, isinstance(rel, sympy.StrictGreaterThan)


def _as_set(expr: sympy.Basic) -> sympy.Basic | None:
    """A one-variable condition (``x > 3``, ``-2 \\le x \\le 7``, ``x \\in [a,b]``) as the set it describes."""
    if isinstance(expr, sympy.Equality) and isinstance(expr.rhs, sympy.Set) and isinstance(expr.lhs, sympy.Symbol):
        return expr.rhs
    if isinstance(expr, (sympy.Rel, sympy.And, sympy.Or)) and not isinstance(expr, (sympy.Equality, sympy.Unequality)):
        if any(not isinstance(f, sympy.Abs) for f in expr.atoms(sympy.Function)):
            return None  # sympy solves trigonometric or exponential conditions by periodicity analysis: slow, unbounded
        if len(expr.free_symbols) == 1 and sympy.count_ops(expr) <= MAX_SIMPLIFY_OPS and not expr.has(
                *UNBOUNDED_OPERATORS):
            try:
                return expr.as_set()
            except Exception:
                return None
    return None


def equivalent(gold: sympy.Basic, pred: sympy.Basic, rel_tol: float) -> bool:
    """Whether a parsed answer equals a parsed gold answer (structure first, then values)."""

    def eq(a: sympy.Basic, b: sympy.Basic) -> bool:
        return equivalent(a, b, rel_tol)

    if isinstance(gold, MatrixBase) or isinstance(pred, MatrixBase):
        if not (isinstance(gold, MatrixBase) and isinstance(pred, MatrixBase)) or gold.shape != pred.shape:
            return False
        return _match_ordered(list(gold), list(pred), eq)
    if isinstance(gold, sympy.FiniteSet) and isinstance(pred, sympy.FiniteSet):
        return _match_unordered(list(gold), list(pred), eq)
    if isinstance(gold, sympy.FiniteSet) and len(gold) == 1 and not isinstance(pred, sympy.Set):
        return eq(gold.args[0], pred)
    if isinstance(pred, sympy.FiniteSet) and len(pred) == 1 and not isinstance(gold, sympy.Set):
        return eq(gold, pred.args[0])
    g_pair, p_pair = _as_pair(gold), _as_pair(pred)
    if g_pair is not None and p_pair is not None:
        return _match_ordered(g_pair, p_pair, eq)
    if isinstance(gold, sympy.Tuple) and isinstance(pred, sympy.Tuple):
        return _match_ordered(list(gold), list(pred), eq)
    if isinstance(gold, sympy.Interval) and isinstance(pred, sympy.Interval):
        return (gold.left_open, gold.right_open) == (pred.left_open, pred.right_open) and _match_ordered(
            [gold.start, gold.end], [pred.start, pred.end], eq
        )
    if isinstance(gold, sympy.Union) and isinstance(pred, sympy.Union):
        return _match_unordered(list(gold.args), list(pred.args), eq)
    if isinstance(gold, sympy.Set) or isinstance(pred, sympy.Set):
        g_set = gold if isinstance(gold, sympy.Set) else _as_set(gold)
        p_set = pred if isinstance(pred, sympy.Set) else _as_set(pred)
        if g_set is None or p_set is None or (g_set is gold and p_set is pred):
            return bool(gold == pred)
        return eq(g_set, p_set)
    if isinstance(gold, sympy.Equality) or isinstance(pred, sympy.Equality):
        return _equations_equal(gold, pred, rel_tol)
    if isinstance(gold, (sympy.And, sympy.Or)) or isinstance(pred, (sympy.And, sympy.Or)):
        g_set, p_set = _as_set(gold), _as_set(pred)
        return g_set is not None and p_set is not None and eq(g_set, p_set)
    if isinstance(gold, sympy.Rel) or isinstance(pred, sympy.Rel):
        if not (isinstance(gold, sympy.Rel) and isinstance(pred, sympy.Rel)):
            return False
        if not all(_scalar(a) for a in (*gold.args, *pred.args)):
            return bool(gold == pred)  # ``x < M`` for a matrix M: no difference of sides to compare
        (g_q, g_strict), (p_q, p_strict) = _relation_parts(gold), _relation_parts(pred)
        return g_strict == p_strict and _proportional(g_q, p_q, positive=True)
    if isinstance(gold, sympy.Expr) and isinstance(pred, sympy.Expr):
        return exprs_equal(gold, pred, rel_tol)
    return bool(gold == pred)


def _equations_equal(gold: sympy.Basic, pred: sympy.Basic, rel_tol: float) -> bool:
    g_solved, p_solved = _solved_side(gold), _solved_side(pred)
    if isinstance(gold, sympy.Equality) and isinstance(pred, sympy.Equality):
        renaming = _same_name(g_solved[0], p_solved[0]) if g_solved and p_solved else None
        if g_solved and p_solved and renaming is not None:
            return equivalent(g_solved[1], p_solved[1].xreplace(renaming), rel_tol)
        g_lhs, g_rhs = gold.args
        p_lhs, p_rhs = pred.args
        if not all(_scalar(a) for a in (g_lhs, g_rhs, p_lhs, p_rhs)):
            return bool(gold == pred)  # ``v = (1, 2)^T`` against ``4x - 5y = -50``: no difference of sides to compare
        return _proportional(g_lhs - g_rhs, p_lhs - p_rhs, positive=False)
    # One side is "x = value" and the other only the value: the value is the answer.
    if g_solved and not isinstance(pred, sympy.Rel):
        return equivalent(g_solved[1], pred, rel_tol)
    if p_solved and not isinstance(gold, sympy.Rel):
        return equivalent(gold, p_solved[1], rel_tol)
    return False
