"""The numeric fast path: plain numbers read exactly as fractions, without sympy.

Most final answers are integers, decimals or simple fractions; reading them with regular expressions into
``fractions.Fraction`` decides those pairs exactly in microseconds. Anything this module does not recognise returns
None and goes on to the symbolic path, so a miss here costs time, never a verdict.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from verifiers.kinds.math.normalize import strip_decorations

# Exponents beyond this are left to the guarded symbolic path (10^400 has 400 digits; fine; 10^10^10 is not).
MAX_EXPONENT = 400

_INT = r"(?:[1-9]\d{0,2}(?:,\d{3})+|\d+)"  # "0,111" groups no thousands: it is a decimal comma, not 111
_DEC = rf"(?:{_INT}(?:\.\d*)?|\.\d+)"
_SIGN = r"(?P<sign>[+-]?)"
_DECIMAL = re.compile(rf"{_SIGN}(?P<num>{_DEC})"
                      rf"(?:(?:[eE]|\s*(?:\\times|\\cdot|\*|×)\s*10\s*\^)\s*\{{?(?P<exp>[+-]?\d+)\}}?)?")
_FRAC = re.compile(r"(?P<sign>[+-]?)\\frac\s*(?:\{\s*(?P<a>[+-]?\d+)\s*\}|(?P<a1>\d))"
                   r"\s*(?:\{\s*(?P<b>\d+)\s*\}|(?P<b1>\d))")
_SLASH = re.compile(r"(?P<sign>[+-]?)(?P<a>\d+)\s*/\s*(?P<b>\d+)")
_MIXED = re.compile(
    r"(?P<sign>[+-]?)(?P<w>\d+)\s*(?:\\frac\s*(?:\{\s*(?P<a>\d+)\s*\}|(?P<a1>\d))\s*(?:\{\s*(?P<b>\d+)\s*\}|(?P<b1>\d))"
    r"|\s(?P<c>\d+)\s*/\s*(?P<d>\d+))"
)
_BASE = re.compile(r"(?P<digits>[0-9A-Za-z]+)_\{?(?P<base>\d+)\}?")
# 0.\overline{3}, 1.1\overline{6}, 0.\dot{3}: a repeating decimal, read exactly
_REPEATING = re.compile(r"(?P<sign>[+-]?)(?P<int>\d*)\.(?P<fixed>\d*)\\(?:overline|dot)\s*\{(?P<rep>\d{1,50})\}")


_SPACED_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?: \d{3})+(?:\.\d+)?")


@dataclass(frozen=True)
class Number:
    """An exactly read number; ``decimal`` when it was written with a decimal point (possibly rounded)."""

    value: Fraction
    decimal: bool = False
    base_digits: str | None = None  # "52" for 52_8: such answers compare by their digits in that base


def _sign(m: re.Match[str]) -> int:
    return -1 if m.group("sign") == "-" else 1


def parse_number(text: str) -> Number | None:
    """Read ``text`` as one number, or return None. ``text`` is an already unwrapped single answer."""
    s = strip_decorations(text).replace("{,}", ",").replace("\\,", "").replace("\\!", "")
    s = re.sub(r"\s+", " ", s).strip()
    if _SPACED_THOUSANDS.fullmatch(s):  # "10 000", "1 234 567.5": digits grouped by spaces
        s = s.replace(" ", "")
    if s.startswith("+"):
        s = s[1:]
    if not s or len(s) > 4_000:  # Python refuses int() of 4300+ digits; longer goes to the guarded paths
        return None
    m = _DECIMAL.fullmatch(s)
    if m:
        raw = m.group("num").replace(",", "")
        if raw in (".", ""):
            return None
        value = Fraction(raw)
        if m.group("exp"):
            exp = int(m.group("exp"))
            if abs(exp) > MAX_EXPONENT:
                return None
            value *= Fraction(10) ** exp
        return Number(_sign(m) * value, decimal="." in raw)
    m = _REPEATING.fullmatch(s)
    if m:
        fixed, rep = m.group("fixed"), m.group("rep")
        tail = (Fraction(int(fixed or "0"), 10 ** len(fixed))
                + Fraction(int(rep), (10 ** len(rep) - 1) * 10 ** len(fixed)))
        return Number(_sign(m) * (int(m.group("int") or "0") + tail))
    m = _FRAC.fullmatch(s)
    if m:
        a, b = int(m.group("a") or m.group("a1")), int(m.group("b") or m.group("b1"))
        return Number(_sign(m) * Fraction(a, b)) if b else None
    m = _SLASH.fullmatch(s)
    if m:
        a, b = int(m.group("a")), int(m.group("b"))
        return Number(_sign(m) * Fraction(a, b)) if b else None
    m = _MIXED.fullmatch(s)
    if m:
        num = int(m.group("a") or m.group("a1") or m.group("c"))
        den = int(m.group("b") or m.group("b1") or m.group("d"))
        if den and num < den:
            return Number(_sign(m) * (int(m.group("w")) + Fraction(num, den)))
        return None
    m = _BASE.fullmatch(s)
    if m:
        digits, base = m.group("digits"), int(m.group("base"))
        if 2 <= base <= 36:
            try:
                return Number(Fraction(int(digits, base)), base_digits=digits.lower())
            except ValueError:
                return None
    return None


def terminates(value: Fraction) -> bool:
    """Whether the value has a finite decimal expansion (its denominator has no prime factors but 2 and 5)."""
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def numbers_equal(gold: Number, pred: Number, rel_tol: float) -> bool:
    """Exact comparison; a decimal is allowed ``rel_tol`` only against a value no decimal can write exactly (1/3)."""
    if gold.base_digits is not None or pred.base_digits is not None:
        if gold.base_digits is not None and pred.base_digits is not None:
            return gold.value == pred.value
        digits = gold.base_digits if gold.base_digits is not None else pred.base_digits
        other = pred if gold.base_digits is not None else gold
        both = gold.value == pred.value
        return both or (other.value.denominator == 1 and str(other.value.numerator) == digits)
    if gold.value == pred.value:
        return True
    for exact, written in ((gold, pred), (pred, gold)):
        if written.decimal and not terminates(exact.value):
            scale = max(abs(exact.value), Fraction(1, 10**12))
            return abs(exact.value - written.value) <= Fraction(rel_tol) * scale
    return False
