"""IFEval's loose mode: an instruction counts as followed if any of eight lenient variants of the response follows it.

The variants forgive what a model adds around an answer: a first line ("Sure, here it is:"), a last line ("Let me
know if..."), both, and markdown emphasis (every ``*`` removed) on top of each.
"""
from __future__ import annotations


def loose_variants(response: str) -> list[str]:
    lines = response.split("\n")
    without_first = "\n".join(lines[1:]).strip()
    without_last = "\n".join(lines[:-1]).strip()
    without_both = "\n".join(lines[1:-1]).strip()
    base = [response, without_first, without_last, without_both]
    return [*base, *(v.replace("*", "") for v in base)]
