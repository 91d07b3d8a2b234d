"""Math spans of a model's output: ``$...$``, ``\\(...\\)``, ``$$...$$``, ``\\[...\\]``, with ``$`` as currency told apart.

Models write prices in prose ("costs $12 each, so $36") beside real inline math, and a regular expression that
pairs any two dollar signs reads "12 each, so " as math: wrong spans, then a false hedge or a parse failure. This
scanner follows the rule Markdown renderers use (pandoc's ``tex_math_dollars``): an opening ``$`` has a non-space
right after it, its closing ``$`` a non-space right before it and no digit right after it, and an inline span never
crosses a blank line. Only the first unescaped ``$`` after an opener may close it; when that one cannot, the opener
is a currency sign. A span that starts with a number and then runs into prose words ("$5 apples and 3 pears$") is
currency too. ``\\$`` is always a literal dollar.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}(?![A-Za-z])")
_TEXT_GROUP = re.compile(r"\\(?:text\w*|mbox|mathrm|operatorname)\s*\{[^{}]*\}")


@dataclass(frozen=True)
class Span:
    """One math span: ``start``/``end`` include the delimiters, ``body`` excludes them."""

    start: int
    end: int
    body: str
    display: bool


def _inline_close(text: str, i: int) -> int | None:
    """Index of the ``$`` closing the inline span opened at ``i``, or None when that ``$`` is currency."""
    if i + 1 >= len(text) or text[i + 1].isspace():
        return None
    k = i + 1
    while k < len(text):
        c = text[k]
        if c == "\\":
            k += 2
            continue
        if c == "\n":
            j = k + 1
            while j < len(text) and text[j] in " \t":
                j += 1
            if j < len(text) and text[j] == "\n":
                return None  # a blank line ends the paragraph: no span crosses it
            k = j
            continue
        if c == "$":
            if text[k - 1].isspace() or (k + 1 < len(text) and (text[k + 1].isdigit() or text[k + 1] == "$")):
                return None
            body = text[i + 1:k]
            if body[0].isdigit() and len(_PROSE_WORD.findall(_TEXT_GROUP.sub(" ", body))) >= 2:
                return None  # "$5 each and then 3$": a price followed by prose
            return k
        k += 1
    return None


def math_spans(text: str) -> list[Span]:
    """Every math span, in order; linear in the text (each character is read once per opener at most once)."""
    spans: list[Span] = []
    i, n = 0, len(text)
    unclosed: set[str] = set()  # closers known absent from here on: a flood of openers stays linear
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "([":
                close = "\\)" if nxt == "(" else "\\]"
                j = -1 if close in unclosed else text.find(close, i + 2)
                if j < 0:
                    unclosed.add(close)
                else:
                    spans.append(Span(i, j + 2, text[i + 2:j], nxt == "["))
                    i = j + 2
                    continue
            i += 2
            continue
        if c == "$":
            if text.startswith("$$", i):
                j = -1 if "$$" in unclosed else _unescaped(text, "$$", i + 2)
                if j < 0:
                    unclosed.add("$$")
                elif text[i + 2:j].strip():
                    spans.append(Span(i, j + 2, text[i + 2:j], True))
                    i = j + 2
                    continue
                i += 2
                continue
            k = _inline_close(text, i)
            if k is not None:
                spans.append(Span(i, k + 1, text[i + 1:k], False))
                i = k + 1
                continue
        i += 1
    return spans


def _unescaped(text: str, token: str, start: int) -> int:
    j = text.find(token, start)
    while j > 0 and text[j - 1] == "\\":
        j = text.find(token, j + 1)
    return j


def inline_spans(text: str) -> list[Span]:
    return [s for s in math_spans(text) if not s.display]


def display_spans(text: str) -> list[Span]:
    return [s for s in math_spans(text) if s.display]


def escape_currency(text: str) -> str:
    """The text with every ``$`` that delimits no math span written ``\\$`` (a literal dollar), so later readers that
    pair dollar signs see only real math."""
    if "$" not in text:
        return text
    keep = set()
    for s in math_spans(text):
        if text.startswith("$", s.start):
            width = 2 if s.display else 1
            keep.update(range(s.start, s.start + width))
            keep.update(range(s.end - width, s.end))
    out = []
    for i, c in enumerate(text):
        if c == "$" and i not in keep and (i == 0 or text[i - 1] != "\\"):
            out.append("\\$")
        else:
            out.append(c)
    return "".join(out)
