"""Cutting a response into reasoning steps when the caller sends text rather than a list."""
from __future__ import annotations

import re
from typing import Literal

SplitRule = Literal["blank_lines", "step_prefix", "newline", "auto"]

_BLANK = re.compile(r"\n[ \t]*\n+")
# "Step 3:", "**Step 3.**", "## Step 3 -" at the start of a line.
_STEP = re.compile(r"^[ \t>#*_]*step[ \t]*\d+[ \t]*[:.)\-]", re.IGNORECASE | re.MULTILINE)


def _clean(parts: list[str]) -> list[str]:
    return [p.strip() for p in parts if p.strip()]


def split_steps(text: str, rule: SplitRule = "blank_lines") -> list[str]:
    """Steps of ``text`` by ``rule``; empty pieces are dropped, so empty text gives no steps.

    ``step_prefix`` keeps the "Step k:" marker with its step (PRMs were trained on it) and keeps any preamble
    before the first marker as a step of its own. ``auto`` uses step markers when there are at least two,
    else blank lines, else lines.
    """
    if rule == "auto":
        if len(_STEP.findall(text)) >= 2:
            rule = "step_prefix"
        elif _BLANK.search(text.strip()):
            rule = "blank_lines"
        else:
            rule = "newline"
    if rule == "blank_lines":
        return _clean(_BLANK.split(text))
    if rule == "newline":
        return _clean(text.split("\n"))
    if rule == "step_prefix":
        starts = [m.start() for m in _STEP.finditer(text)]
        if not starts:
            return _clean([text])
        bounds = [0, *starts, len(text)] if starts[0] > 0 else [*starts, len(text)]
        return _clean([text[a:b] for a, b in zip(bounds, bounds[1:])])
    raise ValueError(f"unknown split rule {rule!r}")
