"""The ``math`` verifier: extract the final answer, refuse hedging and judge-hacking, then run the cascade
string → numeric → text → symbolic, cheapest first. ``details.method`` names the step that decided."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import sympy
from pydantic import Field
from sympy.matrices.matrixbase import MatrixBase

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.math.extract import clip_tail, extract, split_alternatives
from verifiers.kinds.math.guards import TooLarge, check_size, hacking_reason
from verifiers.kinds.math.normalize import (
    canonical,
    declares_only,
    equation_sides,
    interval_form,
    lone_number,
    names_a_quantity,
    polarity,
    split_condition,
    split_top_level,
    strip_decorations,
    text_content,
    unit_list,
    unwrap,
    well_formed,
)
from verifiers.kinds.math.numeric import Number, numbers_equal, parse_number
from verifiers.kinds.math.reference import reference_answer
from verifiers.kinds.math.shape import compound_shape
from verifiers.kinds.math.symbolic import ParseError, equivalent, is_multi_valued, parse_latex
from verifiers.types import InvalidReference, Verdict


class MathOptions(BaseOptions):
    rel_tol: float = Field(
        1e-6, ge=0, le=0.1,
        description="Relative tolerance for answers written with decimals against values no decimal writes exactly "
        "(1/3, pi/2). Exact forms are always compared exactly.",
    )
    tail_chars: int = Field(
        10_000, ge=200, le=1_000_000, description="Responses longer than this are checked on their last N characters."
    )
    last_number_fallback: bool = Field(
        True, description="When no other extraction method finds an answer, use the last number in the response."
    )


@dataclass
class Gold:
    """A reference answer, read once (and cached: GRPO sends the same gold with every rollout of a group).

    A LaTeX gold that passes the syntactic check is parsed only when a comparison needs it, so answers identical
    to the gold never pay for the parser; a gold the parser then rejects is an invalid reference.
    """

    text: str
    key: str  # canonical spelling
    number: Number | None
    words: str | None  # a pure-text answer ("Evelyn", "(C)")
    condition: str | None
    shape: str | None = None  # a tuple, interval, union or matrix the LaTeX parser certainly reads as one
    polar: str | None = None  # "yes"/"no": the gold answers a yes/no question ("No, it is not possible ...")
    named_value: str | None = None  # the value side of a gold that names its value ("\\mathbf{v} = ...", "x = 5")
    comma_decimal: Number | None = None  # "1,22", "0,111": the decimal-comma reading, used against one number
    _expr: sympy.Basic | None = None
    _too_large: bool = False

    @property
    def letter(self) -> bool:
        return self.words is not None and len(self.words) == 1

    @property
    def expr(self) -> sympy.Basic:
        """The parsed gold; raises ``InvalidReference`` when it cannot be parsed or evaluated."""
        if self._expr is None:
            try:
                self._expr = parse_latex(self.text)
            except ParseError as exc:
                raise InvalidReference(f"reference {self.text[:80]!r} cannot be parsed: {exc}") from None
            try:
                check_size(self._expr)
            except TooLarge:
                self._too_large = True
        if self._too_large:
            raise InvalidReference("reference is too large to evaluate; only an identical answer could match")
        return self._expr


def reference_texts(reference: Any) -> list[str]:
    if isinstance(reference, bool) or reference is None:
        raise InvalidReference("reference must be the gold answer: a string or a number")
    if isinstance(reference, (int, float)):
        if reference != reference or reference in (float("inf"), float("-inf")):
            raise InvalidReference("reference is not a finite number")
        return [repr(reference) if isinstance(reference, float) else str(reference)]
    if isinstance(reference, str):
        return [reference]
    if isinstance(reference, list) and reference and all(isinstance(r, (str, int, float)) for r in reference):
        return [t for r in reference for t in reference_texts(r)]
    raise InvalidReference("reference must be a string, a number or a non-empty list of acceptable answers")


@functools.lru_cache(maxsize=4096)
def parse_gold(reference: str) -> Gold:
    """Read a gold answer; raises ``InvalidReference`` when it cannot be used (it must never reward)."""
    text = unwrap(reference_answer(reference))
    body, condition = split_condition(text)
    if not canonical(body):
        raise InvalidReference("reference answer is empty")
    body = unit_list(body) or body  # "1 papers and 2 bins" lists the numbers 1, 2
    body = _chain_value(body)
    number = parse_number(body)
    words = None if number is not None else text_content(body)
    # A yes/no gold that states no value: its polarity is the answer ("Yes, such an n exists" against "yes").
    polar = polarity(body) if number is None and not re.search(r"\d", body) else None
    if polar is not None and words is None:
        words = polar
    sides = equation_sides(body) if number is None else None
    named_value = sides[1] if sides and len(sides) == 2 and _NAME_SIDE.fullmatch(sides[0].strip()) else None
    comma = _DECIMAL_COMMA.fullmatch(strip_decorations(body)) if number is None else None
    gold = Gold(body, canonical(body), number, words, condition, compound_shape(body) if number is None else None,
                polar, named_value, parse_number(comma.group(0).replace(",", ".")) if comma else None)
    if number is not None:
        gold._expr = _number_expr(number)
    elif words is None and not well_formed(body):
        try:
            gold.expr  # noqa: B018 - parse now: raises InvalidReference for an unusable gold
        except InvalidReference:
            if not gold._too_large:
                raise  # one too large to evaluate may still be written back as it is (``_same_structure``)
    return gold


def _chain_value(body: str) -> str:
    """A gold chain that ends in a number states that number, under the chain's name when it has one:
    ``z = 1 + 1 = 2`` is ``z = 2``, ``1 = \\zzz = x = 0`` is ``0``; an answer's chain is read the same way."""
    # "AB=4,CD=5" and "x = 1 \\text{ and } x = -1" name two values: a list, never one chain
    listed = len(split_top_level(body, ",")) > 1 or ";" in body or len(split_alternatives(body)) > 1
    sides = equation_sides(body) if parse_number(body) is None and not listed else None
    if not sides or len(sides) < 3 or parse_number(sides[-1]) is None:
        return body
    return f"{sides[0]} = {sides[-1]}" if _NAME_SIDE.fullmatch(sides[0].strip()) else sides[-1]


def _number_expr(number: Number) -> sympy.Basic:
    """A number for the symbolic path; a decimal stays a Float so ``rel_tol`` applies to it as written."""
    value = number.value
    if number.decimal:
        return sympy.Float(sympy.Rational(value.numerator, value.denominator), 40)
    return sympy.Rational(value.numerator, value.denominator)


def _spellings(gold: Gold, rel_tol: float) -> list[Gold]:
    """A gold "A or B" whose parts state one value ("(1998/1997)^2 or 3992004/3988009") is two spellings of one
    answer, each acceptable alone; any other gold stands as it is (several values "1 or 2" are a set of answers)."""
    parts = split_alternatives(gold.text) if (" or " in gold.text or "\\text" in gold.text) else []
    if len(parts) < 2 or not spellings_agree(parts, rel_tol):
        return [gold]
    return [parse_gold(p) for p in parts]


_BARE_LOG = re.compile(r"\\log(?![A-Za-z])(?!\s*_)")


def _natural_log_reading(gold: Gold) -> list[Gold]:
    """A gold that writes a bare ``\\log`` (read as base 10) may mean the natural log, as analysis problems do
    (Omni-MATH: ``\\frac{\\pi \\log(2)}{8}`` against ``\\frac{\\pi}{8} \\ln(2)``): that reading is a second
    spelling of it. Only this direction: a gold written with ``\\ln`` never accepts a base-10 value."""
    if not _BARE_LOG.search(gold.text):
        return []
    try:
        return [parse_gold(_BARE_LOG.sub(lambda _: "\\ln", gold.text))]
    except InvalidReference:
        return []


def _single_valued(expr: sympy.Basic) -> bool:
    """A scalar gold (a number or formula): compound answers are compared to it only to find them unequal."""
    return isinstance(expr, sympy.Expr) and not isinstance(expr, MatrixBase)


def fold_restatements(answers: list[str]) -> list[str]:
    """An answer ``A = B`` beside another answer that is ``B`` states one value, B: "\\boxed{\\frac{3}{16} =
    0.0011_2}" then "The final answer is 0.0011_2" (MATH 555). Without this the two read as a hedge whenever A and B
    cannot be compared as numbers (a numeral in another base, a named quantity)."""
    if len(answers) < 2:
        return answers
    keys = {canonical(a) for a in answers}
    folded = []
    for answer in answers:
        sides = equation_sides(unwrap(answer))
        last = canonical(sides[-1]) if sides else ""
        folded.append(sides[-1] if sides and last in keys and last != canonical(answer) else answer)
    return folded


def spellings_agree(answers: list[str], rel_tol: float) -> bool:
    """Do several spellings state one value (``\\boxed{3}`` … "Answer: 3.0")? Then a wrong answer is wrong, not a
    hedge."""
    try:
        first = parse_gold(answers[0])
        return all(compare(first, a, rel_tol).equal for a in answers[1:])
    except InvalidReference:  # an answer that cannot be read as a value agrees with nothing
        return False


@dataclass
class Decision:
    equal: bool
    method: str
    hedged: bool = False
    note: str = ""


def compare(gold: Gold, answer: str, rel_tol: float) -> Decision:
    """One extracted answer against the gold, cheapest test first."""
    body, condition = split_condition(unwrap(answer))
    body = _APPROXIMATED.sub("", body) if "=" in body and "=" not in gold.text.split("\\approx")[-1] else body
    if condition != gold.condition and not (declares_only(condition) and declares_only(gold.condition)):
        return Decision(False, "condition", note="the answer's quantifier/condition differs from the reference's")
    if canonical(body) == gold.key:
        return Decision(True, "string")
    if (time := _clock(gold.key)) is not None:  # "12:00" is a time: as a ratio it divides by zero, as "1:00" does
        return Decision(_clock(canonical(body)) == time, "string")
    if gold.comma_decimal is not None and (number := parse_number(body)) is not None:
        return Decision(numbers_equal(gold.comma_decimal, number, rel_tol), "numeric")  # "1,22" against 1.22
    body = unit_list(body) or body
    stated = (_named_list(gold, body, rel_tol) or _statement_value(gold, body, rel_tol)
              or _named_gold_value(gold, body, rel_tol))
    if stated is not None:
        return stated
    listed = (_list_as_tuple(gold, body, rel_tol) or _as_intervals(gold, body, rel_tol)
              or _set_as_listing(gold, body, rel_tol) or _braces_as_tuple(gold, body, rel_tol))
    if listed is not None:
        return listed
    comma_decimal = _DECIMAL_COMMA.fullmatch(body.strip())
    if comma_decimal and gold.number is not None and gold.number.value.denominator != 1:
        body = body.replace(",", ".")  # "3,5" against 3.5: a decimal comma, not the list 3, 5
    number = parse_number(body)
    if gold.number is not None and number is not None:
        if numbers_equal(gold.number, number, rel_tol):
            return Decision(True, "numeric")
        return Decision(_percent_equal(gold, body, number, rel_tol), "numeric")
    said_polar = polarity(body) if gold.polar is not None else None
    if said_polar is not None:
        return Decision(said_polar == gold.polar, "polarity")
    if gold.words is not None:
        said = text_content(body) or canonical(body).strip("()[]").casefold()
        return Decision(said == gold.words, "text")
    if gold._too_large:
        return _same_structure(gold, body)
    # A tuple, interval or matrix never equals one value: decided without parsing the compound side.
    if number is not None and gold.shape:
        return Decision(False, "symbolic")
    if number is None and gold.words is None and compound_shape(body) and _single_valued(gold.expr):
        return Decision(False, "symbolic")
    try:
        expr = _number_expr(number) if number is not None else parse_latex(body)
    except ParseError as exc:
        return Decision(False, "unparseable", note=str(exc))
    if is_multi_valued(expr) and not is_multi_valued(gold.expr):
        return Decision(False, "symbolic", hedged=True, note="the answer holds several different values")
    try:
        return Decision(equivalent(gold.expr, expr, rel_tol), "symbolic")
    except TooLarge as exc:
        return Decision(False, "size_guard", note=str(exc))


# A time of day ("12:00", "3:05"): minutes written with a leading zero, never a ratio such as 3:20.
_CLOCK = re.compile(r"(\d{1,2}):(0\d)")
def _clock(text: str) -> tuple[int, str] | None:
    m = _CLOCK.fullmatch(text)
    return (int(m.group(1)), m.group(2)) if m else None


# "x = 5+5+1 = 1/3 \\approx 0.33": a chain's exact value, then a decimal approximation of it, which is not the answer.
_APPROXIMATED = re.compile(r"(?<=\S)\s*(?:\\approx|≈)(?:(?!=).)*$", re.DOTALL)
def _same_structure(gold: Gold, body: str) -> Decision:
    """A gold too large to evaluate (``\\sum_{k=0}^{n-1} F_k F_{n-k-1}``) against an answer that parses to the same
    expression, up to the order of a sum's or product's terms (``F_{n-k-1} F_k``): equal without evaluating either.
    Anything else cannot be decided: the reference stays invalid."""
    try:
        if sympy.srepr(parse_latex(body)) == sympy.srepr(gold._expr):  # the parser makes new symbols per call
            return Decision(True, "symbolic")
    except ParseError:
        pass
    raise InvalidReference("reference is too large to evaluate; only the same expression could match")


# A comma that cannot group thousands: one to two or four and more digits after it, or a leading "0," ("0,111").
# In a gold it is read as a decimal comma against an answer that is one number, as a list against a list; "1,000"
# (groups of three after a nonzero digit) is a thousands separator on either side.
_DECIMAL_COMMA = re.compile(r"-?(?:0,\d+|\d+,(?:\d{1,2}|\d{4,}))")
_SET_LITERAL = re.compile(r"^\s*(?:\\left\s*)?\\?\{(?P<inner>.*?)(?:\\right\s*)?\\?\}\s*$", re.DOTALL)


def _set_as_listing(gold: Gold, body: str, rel_tol: float) -> Decision | None:
    """A gold written as a set of solutions (``\\{1, 3\\}``, ``{1, 3}``, several boxes) against the same values
    listed in parentheses, ``(1, 3)`` or ``(3, 1)``: one set. Only where the gold is a set; a gold ``(1, 3)`` is an
    interval or a point and never equals the set ``\\{1, 3\\}``."""
    g, a = _SET_LITERAL.match(gold.text), _BRACKETED.match(body)
    if g is None or a is None:
        return None
    elements = split_top_level(g.group("inner"), ",")
    values = split_top_level(re.sub(r"\\right\s*$", "", a.group("inner").strip()), ",")
    if len(elements) < 2 or len(elements) != len(values) or not all(elements) or not all(values):
        return None
    try:
        decision = compare(parse_gold(", ".join(elements)), ", ".join(values), rel_tol)
    except InvalidReference:
        return None
    return decision if decision.equal and not decision.hedged else None


def _braces_as_tuple(gold: Gold, body: str, rel_tol: float) -> Decision | None:
    """A gold tuple ``(1, 3)`` against the same values in a LaTeX group, ``{1, 3}`` (braces LaTeX does not print: the
    values written with no brackets), in the gold's order. Only accepts, only in order (``{3, 1}`` is not ``(1, 3)``),
    and never for a set ``\\{1, 3\\}``."""
    g, a = _BRACKETED.match(gold.text), _SET_LITERAL.match(body)
    if g is None or a is None or body.lstrip().startswith(("\\", "\\left")):
        return None  # a set \\{1, 3\\} is never the point or interval (1, 3)
    elements = split_top_level(re.sub(r"\\right\s*$", "", g.group("inner").strip()), ",")
    values = split_top_level(a.group("inner"), ",")
    if len(elements) < 2 or len(elements) != len(values) or not all(elements) or not all(values):
        return None
    try:
        if all(compare(parse_gold(e), v, rel_tol).equal for e, v in zip(elements, values)):
            return Decision(True, "symbolic")
    except InvalidReference:
        return None
    return None


def _as_intervals(gold: Gold, body: str, rel_tol: float) -> Decision | None:
    """``0 < f(x) < 1``, ``f(x) \\in (0, 1)`` and ``(0, 1)`` state one interval for one quantity: compared as
    intervals when at least one side names the quantity and no two names differ."""
    g, a = interval_form(gold.text), interval_form(body)
    if g is None or a is None or (g[0] is None and a[0] is None) or (g[0] and a[0] and g[0] != a[0]):
        return None
    try:
        decision = compare(parse_gold(g[1]), a[1], rel_tol)
    except InvalidReference:
        return None
    return decision if decision.equal else None


_PERCENT_SIGN = re.compile(r"%|\\%|\bpercent\b")


def _percent_equal(gold: Gold, body: str, number: Number, rel_tol: float) -> bool:
    """62.5% and 0.625 are one value: when exactly one side writes a percent, it is also read as a fraction."""
    gold_pct, answer_pct = bool(_PERCENT_SIGN.search(gold.text)), bool(_PERCENT_SIGN.search(body))
    if gold_pct == answer_pct or gold.number is None:
        return False
    if gold_pct:
        return numbers_equal(Number(gold.number.value / 100, gold.number.decimal), number, rel_tol)
    return numbers_equal(gold.number, Number(number.value / 100, number.decimal), rel_tol)


_BRACKETED = re.compile(r"^\s*(?:\\left\s*)?\((?P<inner>.*)(?:\\right\s*)?\)\s*$", re.DOTALL)


def _list_as_tuple(gold: Gold, body: str, rel_tol: float) -> Decision | None:
    """A gold written as a bare list ("1,2,3", "$10^{3},10$") against the same values as a tuple "(1, 2, 3)", in
    the gold's order; None when that reading does not apply or does not match (the usual comparison decides)."""
    if gold.words is not None or gold.text.lstrip()[:1] in "([{\\" and not gold.text.lstrip().startswith("\\frac"):
        return None
    parts = split_top_level(gold.text, ",")
    m = _BRACKETED.match(body)
    if len(parts) < 2 or not m:
        return None
    inner = re.sub(r"\\right\s*$", "", m.group("inner").strip())
    values = split_top_level(inner, ",")
    if len(values) != len(parts) or not all(parts) or not all(values):
        return None
    try:
        if all(compare(parse_gold(g), a, rel_tol).equal for g, a in zip(parts, values)):
            return Decision(True, "symbolic")
    except InvalidReference:
        return None
    return None


def _named_list(gold: Gold, body: str, rel_tol: float) -> Decision | None:
    """``a = 2, b = 3`` against the pair ``(2, 3)``, ``x = 1, x = -2`` against the roots ``1, -2``: the values, in the
    order written, compared as a tuple (distinct names) or as a set. Only against a compound gold (against one value
    a list of values is a hedge); other values make it a wrong answer, not a hedge."""
    if gold.words is not None or not ("," in gold.text or gold.shape):
        return None
    parts = split_top_level(body, ",")
    if len(parts) < 2:
        return None
    sides = [equation_sides(p) or [] for p in parts]
    if any(len(s) != 2 or not names_a_quantity(s[0]) for s in sides):
        return None
    by_name = _named_parts(gold.text)
    if by_name and {canonical(s[0]) for s in sides} == set(by_name) and len(sides) == len(by_name):
        # both name their values ("a_3 = 2, a_{37} = 19"): each name's value, in any order
        try:
            equal = all(compare(parse_gold(by_name[canonical(s[0])]), s[1], rel_tol).equal for s in sides)
        except InvalidReference:
            equal = False
        return Decision(equal, "symbolic")
    values = ", ".join(s[1] for s in sides)
    forms = [values]
    if len({canonical(s[0]) for s in sides}) == len(sides):  # distinct names: an ordered tuple
        forms.insert(0, f"({values})")
    for form in forms:
        decision = compare(gold, form, rel_tol)
        if decision.equal and not decision.hedged:
            return decision
    return Decision(False, decision.method)  # one compound answer with other values: wrong, not a hedge


def _named_parts(text: str) -> dict[str, str] | None:
    """``a_3 = 2, a_{37} = 19`` → {name: value} when every part names a value under a name of its own."""
    sides = [equation_sides(p) or [] for p in split_top_level(unwrap(text), ",")]
    if len(sides) < 2 or any(len(s) != 2 or not names_a_quantity(s[0]) for s in sides):
        return None
    named = {canonical(s[0]): s[1] for s in sides}
    return named if len(named) == len(sides) else None


# The name side of a gold "name = value": a letter or a Greek letter (optionally bold or an arrow, with a subscript),
# or a function of some arguments: \mathbf{v}, \vec{AB}, x_1, \theta, f(x). Never an expression ("x^2 + y^2").
_NAME_SIDE = re.compile(
    r"(?:\\(?:mathbf|vec|boldsymbol|overrightarrow|bar|hat)\s*\{\s*[A-Za-z]{1,2}\s*\}|[A-Za-z]"
    r"|\\(?:alpha|beta|gamma|delta|theta|lambda|mu|phi|varphi|omega|sigma|tau|rho|psi))"
    r"(?:_\{?\w+\}?)?(?:\s*\([^()=]*\))?"
)


def _named_gold_value(gold: Gold, body: str, rel_tol: float) -> Decision | None:
    """A gold that names its value (``\\mathbf{v} = \\begin{pmatrix}...``, ``x = 5``, ``f(x) = 2x``) against an answer
    that states the value alone: compared with the gold's value side. Only accepts; an answer that is itself an
    equation goes the usual way (its own name must then match)."""
    if gold.named_value is None or equation_sides(body) is not None:
        return None
    try:
        value = parse_gold(gold.named_value)
    except InvalidReference:
        return None
    decision = compare(value, body, rel_tol)
    return decision if decision.equal and not decision.hedged else None


def _statement_value(gold: Gold, body: str, rel_tol: float) -> Decision | None:
    """The value a final statement gives, against a value gold: ``AB = 7``, ``f(2) = 5``,
    ``\\cos \\angle RPS = -24/25``, a computation ``\\text{Total} = 20 \\times 2 = 40``, a sentence with one number
    ("Verna received $7.00 in change", "12 tomatoes"). Only ever accepts (a miss falls through to the usual comparison
    of the whole statement). A chain states its last value (``x = 1 = 5`` states 5, never 1). Against a gold that is
    itself an equation, only a chain that names the gold's quantity (``_named_chain``)."""
    if gold.words is not None:
        return None
    gold_sides = equation_sides(gold.text)
    if gold_sides is not None:
        return _named_chain(gold, gold_sides, body, rel_tol)
    sides = equation_sides(body)
    if sides is not None:
        # A chain states its last value; the sides before it are working ("x = 5+5+1 = 7 = 11": a slip on the way
        # is not a second answer, and only the last value is ever compared, so listing values gains nothing).
        decision = compare(gold, sides[-1], rel_tol)
        return decision if decision.equal and not decision.hedged else None
    if gold.number is not None or gold.comma_decimal is not None:
        number = lone_number(body)
        if number is not None and number != body.strip():
            decision = compare(gold, number, rel_tol)
            return decision if decision.equal else None
    return None


def _named_chain(gold: Gold, gold_sides: list[str], body: str, rel_tol: float) -> Decision | None:
    """A chain ``x = 5+5+1 = 7 = 11`` against a gold that names its value (``x = 11``): the same name, and the
    chain's last value. Only accepts; a chain that names another quantity falls through to the usual comparison."""
    sides = equation_sides(body)
    if gold.named_value is None or sides is None or len(sides) < 3 or canonical(sides[0]) != canonical(gold_sides[0]):
        return None
    try:
        decision = compare(parse_gold(gold.named_value), sides[-1], rel_tol)
    except InvalidReference:
        return None
    return decision if decision.equal and not decision.hedged else None


class MathVerifier(Verifier[MathOptions]):
    name = "math"
    version = "2"
    description = (
        "Final-answer math checking: extraction (boxed, 'answer is', ####, bold, $...$, bare LaTeX, plain text, "
        "last number) and equivalence (string, exact numeric, symbolic with sympy); hedging is rejected."
    )
    Options = MathOptions

    def check(self, response: str, reference: Any, options: MathOptions) -> Verdict:
        golds = [g for t in reference_texts(reference) for s in _spellings(parse_gold(t), options.rel_tol)
                 for g in (s, *_natural_log_reading(s))]
        text, truncated = clip_tail(response or "", options.tail_chars)
        details: dict[str, Any] = {"truncated_to_tail": options.tail_chars} if truncated else {}
        found = extract(text, last_number=options.last_number_fallback, choice_letters=any(g.letter for g in golds))
        if found is None:
            hack = hacking_reason(text)
            if hack and text.strip():
                return Verdict.rejected(hack, method="guard", **details)
            return Verdict.no_answer(hack or "no final answer found", **details)
        answers = [part for a in found.answers for part in (split_alternatives(a) or [a])]
        details.update(extracted=answers[0] if len(answers) == 1 else answers, extraction=found.method)
        if all(not canonical(a) for a in found.answers):
            return Verdict.no_answer("the final answer is empty", **details)
        hack = next((r for a in answers if (r := hacking_reason(unwrap(a)))), None)
        if hack and not any(canonical(a) == g.key for a in answers for g in golds):
            return Verdict.rejected(hack, method="guard", **details)
        return self._decide(golds, answers, options, details)

    def _decide(self, golds: list[Gold], answers: list[str], options: MathOptions, details: dict[str, Any]) -> Verdict:
        answers = fold_restatements(answers)
        distinct = list(dict.fromkeys(canonical(a) for a in answers))
        last: Decision | None = None
        for gold in golds:
            if len(distinct) > 1:
                if gold.words is None and is_multi_valued(gold.expr):
                    decision = compare(gold, ", ".join(answers), options.rel_tol)
                else:
                    each = [compare(gold, a, options.rel_tol) for a in answers]
                    if not all(d.equal for d in each):
                        if any(d.equal for d in each) or not spellings_agree(answers, options.rel_tol):
                            return Verdict.rejected(
                                f"several different final answers: {', '.join(distinct)[:200]}", method="hedging",
                                **details,
                            )
                        last = next((d for d in each if not d.equal), each[-1])
                        continue  # one wrong answer, written several ways
                    decision = each[-1]
            else:
                decision = compare(gold, answers[-1], options.rel_tol)
            if decision.hedged:
                return Verdict.rejected(decision.note, method="hedging", **details)
            if decision.equal:
                return Verdict.ok(1.0, "equivalent to the reference", method=decision.method, **details)
            last = decision
        assert last is not None
        if last.method == "unparseable":
            return Verdict.no_answer(f"the extracted answer could not be parsed: {last.note}", method=last.method,
                                     **details)
        reason = last.note or "not equivalent to the reference"
        return Verdict.ok(0.0, reason, method=last.method, **details)


VERIFIERS: list[Verifier[Any]] = [MathVerifier()]
