"""One response's vote: its final answer read with the math answer core, and a bucket key for clustering.

The reading mirrors the ``math`` verifier without a gold: the same extraction, the same judge-hacking guard and the
same hedging rule (several final answers that are not one value written several ways). A response that states no
answer, a content-free one, or a hedge never votes. The key puts answers that are certainly equal in one bucket
without any parsing: one exact rational for every spelling of a number ("1/2", "0.5", "\\frac{1}{2}", "50%" is 50),
casefolded words for text and choice letters, the canonical spelling for anything else; "x = 5" votes as 5.
"""
from __future__ import annotations

import cmath
from dataclasses import asdict, dataclass
from typing import Any

import sympy
from sympy.matrices.matrixbase import MatrixBase

from verifiers.kinds.math.extract import clip_tail, extract, split_alternatives
from verifiers.kinds.math.guards import check_size, hacking_reason
from verifiers.kinds.math.normalize import (
    canonical,
    equation_sides,
    lone_number,
    names_a_quantity,
    split_condition,
    split_top_level,
    text_content,
    unwrap,
)
from verifiers.kinds.math.numeric import parse_number
from verifiers.kinds.math.shape import compound_shape
from verifiers.kinds.math.symbolic import parse_latex
from verifiers.kinds.math.verifier import spellings_agree

NUMBER, TEXT, EXPR, SET = "number", "text", "expr", "set"


@dataclass
class Vote:
    """A readable final answer. ``value`` is what the key was computed from ("5" for "x = 5")."""

    answer: str
    value: str
    kind: str  # number | text | expr | set
    key: str
    condition: str | None = None
    several: str | None = None  # for a set: why it is a hedge unless the group's majority states that set too
    probe: list[float] | None = None  # the value (at fixed points for letters), to skip pairs that differ clearly
    compound: bool = False  # a list, tuple, interval or matrix: never equal to one number

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vote:
        return cls(**data)


@dataclass
class Unreadable:
    """Why a response casts no vote; ``hedged`` marks a refusal (a hedge or a judge-hacking answer)."""

    reason: str
    hedged: bool
    extracted: Any = None


def _stated_value(body: str) -> str:
    """``x = 5`` → ``5``: a name given a number states that number (an equation like ``y = 2x + 3`` stays whole);
    a sentence with one number ("So 9.0 is the answer", "12 tomatoes") states that number, as ``math`` reads it."""
    sides = equation_sides(body)
    if sides and len(sides) == 2 and names_a_quantity(sides[0]) and parse_number(sides[1]) is not None:
        return sides[1]
    if parse_number(body) is None and (number := lone_number(body)) is not None:
        return number
    return body


def bucket(answer: str) -> Vote:
    """The vote of one readable answer."""
    body, condition = split_condition(unwrap(answer))
    value = _stated_value(body)
    number = parse_number(value)
    if number is not None:
        frac = number.value
        kind, key = NUMBER, f"n:{frac.numerator}/{frac.denominator}"
    elif (words := text_content(value)) is not None:
        kind, key = TEXT, f"t:{words}"
    else:
        kind, key = EXPR, f"e:{canonical(value)}"
    if condition:
        key += f"|{canonical(condition)}"
    probe = [float(number.value), 0.0] if number is not None else _probe(value) if kind == EXPR else None
    compound = kind == EXPR and bool(compound_shape(value) or len(split_top_level(value, ",")) > 1)
    return Vote(answer.strip(), value, kind, key, condition, probe=probe, compound=compound)


def _point(symbol: sympy.Symbol) -> sympy.Rational:
    """A fixed, name-dependent test value (the same in every worker), away from 0, 1 and small integers."""
    return sympy.Rational(100 + sum(map(ord, symbol.name)) % 89, 137)


def _probe(value: str) -> list[float] | None:
    """A scalar answer's numeric value, its letters set to fixed points: equal answers give equal probes, so two
    representatives whose probes differ clearly need no symbolic check. None when there is no such scalar value."""
    if "=" in value:  # a statement ("150 \\div 3 = 50") can only equal what its last side states
        sides = equation_sides(value)
        if not sides or "=" in sides[-1]:
            return None
        number = parse_number(sides[-1])
        return [float(number.value), 0.0] if number is not None else _probe(sides[-1])
    try:
        expr = parse_latex(value)
        check_size(expr)
        if not isinstance(expr, sympy.Expr) or isinstance(expr, MatrixBase):
            return None
        z = complex(sympy.N(expr.subs({s: _point(s) for s in expr.free_symbols}), 20))
    except Exception:
        return None
    return [z.real, z.imag] if cmath.isfinite(z) else None


def read_vote(response: str, *, tail_chars: int, last_number: bool, choice_letters: bool,
              rel_tol: float) -> Vote | Unreadable:
    """The response's vote, or why it has none (same extraction and guards as the ``math`` verifier)."""
    text, _ = clip_tail(response or "", tail_chars)
    found = extract(text, last_number=last_number, choice_letters=choice_letters)
    if found is None:
        hack = hacking_reason(text)
        return Unreadable(hack or "no final answer found", hedged=bool(hack and text.strip()))
    answers = [part for a in found.answers for part in (split_alternatives(a) or [a])]
    shown = answers[0] if len(answers) == 1 else answers
    if all(not canonical(a) for a in answers):
        return Unreadable("the final answer is empty", hedged=False, extracted=shown)
    hack = next((r for a in answers if (r := hacking_reason(unwrap(a)))), None)
    if hack:
        return Unreadable(hack, hedged=True, extracted=shown)
    distinct = list(dict.fromkeys(canonical(a) for a in answers))
    if len(distinct) > 1 and not spellings_agree(answers, rel_tol):
        reason = f"several different final answers: {', '.join(distinct)[:200]}"
        # "it could be 4; it could also be 5", "It is 4 or 5": candidates, a hedge whatever the others say
        if found.method in ("tentative", "closing_sentence"):
            return Unreadable(reason, hedged=True, extracted=shown)
        return several(answers, reason)
    return bucket(answers[-1])


def several(answers: list[str], reason: str) -> Vote:
    """Several committed final answers ("\\boxed{1} and \\boxed{3}") vote as one set. As with ``math`` against a
    gold, they are a hedge unless the answer is itself a set: here, unless the group's majority states that set."""
    parts = list({v.key: v for v in map(bucket, answers)}.values())
    parts.sort(key=lambda v: v.key)
    shown = ", ".join(v.answer for v in parts)
    return Vote(shown, shown, SET, "s:" + "&".join(v.key for v in parts), None, reason)
