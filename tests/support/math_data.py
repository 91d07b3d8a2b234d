"""Reading the shared math data sets, and rewriting a gold answer into forms that must stay equal to it."""
from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

from verifiers.kinds.math.normalize import canonical
from verifiers.kinds.math.numeric import parse_number, terminates


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rewrites(gold: str) -> list[str]:
    """Equivalent spellings of a gold answer, the way models write them."""
    out = set()
    if "\\frac" in gold:
        out.add(gold.replace("\\frac", "\\dfrac"))
    if "\\dfrac" in gold:
        out.add(gold.replace("\\dfrac", "\\frac"))
    m = re.fullmatch(r"(-?)\\d?frac\{(\d+)\}\{(\d+)\}", gold)
    if m:
        out.add(f"{m.group(1)}{m.group(2)}/{m.group(3)}")
        value = Fraction(int(m.group(2)), int(m.group(3)))
        if terminates(value):
            out.add(f"{m.group(1)}{float(value)!r}")
        out.add(f"{m.group(1)}\\frac{{{int(m.group(2)) * 3}}}{{{int(m.group(3)) * 3}}}")  # unreduced
    number = parse_number(gold)
    if number is not None and number.value.denominator == 1 and number.base_digits is None:
        out.add(f"{number.value.numerator}.0")
        out.add(f"{number.value.numerator:,}")
    spaced = re.sub(r"\s+", "", gold)
    if spaced != gold:
        out.add(spaced)
    if number is None:
        out.add(re.sub(r"([+=,])", r" \1 ", gold))
    if gold.startswith("(") and gold.endswith(")") and "\\left" not in gold:
        out.add(f"\\left({gold[1:-1]}\\right)")
    set_match = re.fullmatch(r"\\\{(.*)\\\}", gold)
    bare_list = "," in gold and not re.search(r"[(\[\\{]", gold) and not re.fullmatch(r"\d{1,3}(,\d{3})+", gold)
    if set_match or bare_list:
        items = [p.strip() for p in (set_match.group(1) if set_match else gold).split(",")]
        rev = ", ".join(reversed(items))
        out.add(f"\\{{{rev}\\}}" if set_match else rev)
    if gold.endswith("^\\circ"):
        out.add(gold[: -len("^\\circ")] + "^{\\circ}")
    out.discard(gold)
    return sorted(out)


def same_value(a: str, b: str) -> bool:
    """Cheap independent test for "these two golds are the same answer" (skip such pairs as cross negatives)."""
    ca, cb = canonical(a), canonical(b)
    ca, cb = re.sub(r"^[a-z]=", "", ca), re.sub(r"^[a-z]=", "", cb)
    if ca == cb:
        return True
    na, nb = parse_number(a), parse_number(b)
    return na is not None and nb is not None and na.value == nb.value
