"""Math spans of a model's output: ``$...$``, ``\\(...\\)``, ``$$...$$``, ``\\[...\\]``, with ``$`` as currency
told apart.

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


_INLINE_STOP = re.compile(r"\\.|\$|\n[ \t]*\n", re.DOTALL)  # an escape (skipped), a dollar, a blank line
_ESCAPE_OR_OPENER = re.compile(r"\\(?:[(\[]|.)|\$", re.DOTALL)


def _inline_close(text: str, i: int) -> int | None:
    """Index of the ``$`` closing the inline span opened at ``i``, or None when that ``$`` is currency."""
    if i + 1 >= len(text) or text[i + 1].isspace():
        return None
    for m in _INLINE_STOP.finditer(text, i + 1):
        token = m.group(0)
        if token.startswith("\\"):
            continue
        if token != "$":
            return None  # a blank line ends the paragraph: no span crosses it
        k = m.start()
        if text[k - 1].isspace() or (k + 1 < len(text) and (text[k + 1].isdigit() or text[k + 1] == "$")):
            return None
        body = text[i + 1:k]
        if body[0].isdigit() and len(_PROSE_WORD.findall(_TEXT_GROUP.sub(" ", body))) >= 2:
            return None  # "$5 each and then 3$": a price followed by prose
        return k
    return None


def math_spans(text: str) -> list[Span]:
    """Every math span, in order; linear in the text (the scan jumps between backslashes and dollar signs, and a
    closer known to be absent is never searched for again)."""
    spans: list[Span] = []
    n = len(text)
    unclosed: set[str] = set()  # closers known absent from here on: a flood of openers stays linear
    i = 0
    while i < n:
        m = _ESCAPE_OR_OPENER.search(text, i)
        if m is None:
            break
        i = m.start()
        token = m.group(0)
        if token.startswith("\\"):
            if token in ("\\(", "\\["):
                close = "\\)" if token == "\\(" else "\\]"
                j = -1 if close in unclosed else text.find(close, i + 2)
                if j < 0:
                    unclosed.add(close)
                else:
                    spans.append(Span(i, j + 2, text[i + 2:j], token == "\\["))
                    i = j + 2
                    continue
            i = m.end()
            continue
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


def inline_first(text: str) -> list[Span]:
    """The inline spans, or the display spans when there is no inline one (from one scan)."""
    spans = math_spans(text)
    return [s for s in spans if not s.display] or [s for s in spans if s.display]


def inline_spans(text: str) -> list[Span]:
    return [s for s in math_spans(text) if not s.display]


def display_spans(text: str) -> list[Span]:
    return [s for s in math_spans(text) if s.display]


_LONE_DOLLAR = re.compile(r"(?<!\\)\$")
_PRICE = re.compile(r"(?<!\\)\$\s?\d")


def escape_currency(text: str) -> str:
    """The text with every ``$`` that delimits no math span written ``\\$`` (a literal dollar), so later readers that
    pair dollar signs see only real math."""
    if not _PRICE.search(text):  # currency signs come before a number; without one there is nothing to escape
        return text
    keep: set[int] = set()
    for s in math_spans(text):
        if text.startswith("$", s.start):
            width = 2 if s.display else 1
            keep.update(range(s.start, s.start + width))
            keep.update(range(s.end - width, s.end))
    return _LONE_DOLLAR.sub(lambda m: m.group(0) if m.start() in keep else "\\$", text)
