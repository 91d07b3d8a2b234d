"""Cheap refusals that run before any comparison: judge-hacking answers, and values too large to evaluate.

The worker pool kills a check that overruns its deadline, but a kill costs a worker respawn; estimating an
expression's size from its tree (no evaluation) lets ``10^{10^{10^{10}}}`` or ``(10^{200})!`` be refused in
microseconds instead.
"""
from __future__ import annotations

import math
import re

import sympy
from sympy.matrices.matrixbase import MatrixBase

# Answers that carry no content and are known to fool judges.
_HACK_PHRASES = re.compile(
    r"^(?:thought\s+process|let'?s\s+solve\s+this\s+problem\s+step\s+by\s+step|solution|answer|final\s+answer|"
    r"step\s+by\s+step|reasoning|explanation|かいせつ|解説|解答|答案|答え)?$",
    re.IGNORECASE,
)
_PUNCT_ONLY = re.compile(r"^[\s\W_]*$")

# Largest value that is evaluated exactly (decimal digits) and numerically (log10 of the magnitude).
MAX_EXACT_DIGITS = 20_000
MAX_NUMERIC_LOG10 = 1e9
MAX_FACTORIAL = 5_000
MAX_SERIES_TERMS = 500  # a written-out sum or product is evaluated term by term
# Unevaluated calculus in an answer: evaluating it means symbolic integration (Risch, Meijer G), adaptive quadrature
# at 60 digits or Gruntz's limit algorithm, none with a time bound (\int_0^{100} x^{50} e^{-x} \sin x dx ran past
# 40 s). Such a value only matches when spelled exactly as the reference spells it.
UNBOUNDED_OPERATORS = (sympy.Integral, sympy.Limit)
# Tree size (sympy.count_ops) up to which sympy's simplify or set solving is tried; on real answers these steps see
# at most 16 operations (ProcessBench: 3,397 rows), and their cost grows much faster than the tree.
MAX_SIMPLIFY_OPS = 80
# An answer left as arithmetic on written-out matrices is evaluated only for operands of at most this many entries
# and integer powers up to this exponent (with the exact path's digit bound on the entries it produces).
MAX_MATRIX_ENTRIES = 100
MAX_MATRIX_POWER = 12
# A function evaluated at a number with more digits than this (sin(10^{10^7}), log(10^{10^8})) needs that many digits
# of working precision, or the integer itself built: minutes, though the value is small. Such an argument is refused.
MAX_FUNCTION_ARG_LOG10 = 10_000


def hacking_reason(answer: str) -> str | None:
    """Why an extracted answer is only a judge-hacking string (":", "Thought process:", empty), else None."""
    stripped = answer.strip()
    if not stripped:
        return "the final answer is empty"
    if _PUNCT_ONLY.match(stripped):
        return f"the final answer {stripped[:20]!r} is only punctuation"
    words = re.sub(r"[\s\W_]+$", "", re.sub(r"^[\s\W_]+", "", stripped))
    if _HACK_PHRASES.match(words):
        return f"the final answer {stripped[:40]!r} is a content-free phrase"
    return None


class TooLarge(Exception):
    """The expression's value is too large to evaluate within the verifier's bounds."""


def _num(expr: sympy.Basic) -> float | None:
    """A cheap float for a small numeric subtree (exponents, factorial arguments), or None if it has symbols."""
    if expr.free_symbols:
        return None
    size = log10_size(expr)
    if size > 15:
        raise TooLarge(f"{str(expr)[:60]} is too large")
    try:
        return float(sympy.N(expr, 15))
    except (TypeError, ValueError, OverflowError):
        return None


def log10_size(expr: sympy.Basic) -> float:
    """An upper estimate of log10 |value| read from the tree, without evaluating large powers or factorials.

    Symbols count as magnitude ~10 (the verifier substitutes small test points for them).
    """
    if not isinstance(expr, sympy.Basic) or isinstance(expr, MatrixBase):
        try:
            return max((log10_size(e) for e in expr), default=1.0)  # matrices, lists
        except TypeError:
            return 1.0
    if isinstance(expr, sympy.Integer):
        p = abs(int(expr))
        return p.bit_length() * 0.30103 if p >= 10**15 else math.log10(p + 1)
    if isinstance(expr, sympy.Rational):
        return max(log10_size(sympy.Integer(expr.p)), log10_size(sympy.Integer(expr.q)))
    if isinstance(expr, sympy.Float):
        return abs(float(sympy.log(abs(expr) + 1, 10))) if expr.is_finite else 1.0
    if isinstance(expr, sympy.Symbol) or expr.is_Atom:
        return 1.0
    if isinstance(expr, sympy.Pow):
        base, exp = expr.args
        b_size = log10_size(base)
        e_size = log10_size(exp)
        if e_size > 12:
            if base.is_number and base in (sympy.Integer(0), sympy.Integer(1), sympy.Integer(-1)):
                return 1.0
            return math.inf
        e_val = _num(exp)
        if e_val is None:
            e_val = 10.0 ** e_size
        size: float = max(b_size, 1.0) * (abs(e_val) + 1)  # e_val may be a sympy number: no float() overflow
        return size
    if isinstance(expr, (sympy.factorial, sympy.gamma, sympy.factorial2, sympy.subfactorial)):
        n = _num(expr.args[0])
        if n is None:
            return 10.0
        return (abs(n) + 1) * math.log10(abs(n) + 2)
    if isinstance(expr, (sympy.exp,)):
        v = _num(expr.args[0])
        return abs(v) * 0.4343 + 1 if v is not None else log10_size(expr.args[0]) * 10
    if isinstance(expr, sympy.Mul):
        return sum(log10_size(a) for a in expr.args)
    sizes = [log10_size(a) for a in expr.args] if expr.args else [1.0]
    return max(sizes) + math.log10(len(sizes) + 1)


def check_evaluable(*exprs: sympy.Basic) -> None:
    """Raise ``TooLarge`` when comparing by value would evaluate an integral or a limit (see UNBOUNDED_OPERATORS)."""
    for expr in exprs:
        if isinstance(expr, sympy.Basic) and expr.has(*UNBOUNDED_OPERATORS):
            kind = "an integral" if expr.has(sympy.Integral) else "a limit"
            raise TooLarge(f"{kind} is not evaluated (no time bound); only an identical spelling matches")


def check_size(expr: sympy.Basic) -> float:
    """Raise ``TooLarge`` when evaluating ``expr`` could not finish quickly; return the size estimate."""
    size = log10_size(expr)
    if size > MAX_NUMERIC_LOG10:
        raise TooLarge(f"value of about 10^{size:.3g} is too large to evaluate")
    nodes = [n for e in (expr if isinstance(expr, MatrixBase) else [expr]) for n in sympy.preorder_traversal(e)]
    for node in nodes:
        if isinstance(node, (sympy.factorial, sympy.factorial2, sympy.subfactorial)):
            n = _num(node.args[0])
            if n is not None and abs(n) > MAX_FACTORIAL:
                raise TooLarge(f"factorial of {n:.3g} is too large to evaluate")
        elif isinstance(node, sympy.Function) and not isinstance(node, sympy.exp):
            for arg in node.args:
                if log10_size(arg) > MAX_FUNCTION_ARG_LOG10:
                    raise TooLarge(f"{type(node).__name__} of a number of about 10^{log10_size(arg):.3g} is too "
                                   "costly to evaluate")
        elif isinstance(node, (sympy.Sum, sympy.Product)):
            for limit in node.limits:
                low, high = (_num(b) if len(limit) == 3 else None for b in limit[1:3])
                if low is None or high is None or high - low > MAX_SERIES_TERMS:
                    terms = "unbounded or symbolic" if low is None or high is None else f"{high - low + 1:.3g}"
                    raise TooLarge(f"a {type(node).__name__.lower()} of {terms} terms is too long to evaluate")
    return size
