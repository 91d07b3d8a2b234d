"""What a response's closing words state outside its committed statements: the one number of a concluding prose
sentence, a sum of money in a plain line, and whether working used a boxed value (so the box was a step)."""
from __future__ import annotations

import re

from verifiers.kinds.math.normalize import lone_number, unwrap
from verifiers.kinds.math.numeric import parse_number
from verifiers.kinds.math.spans import display_spans, math_spans

# A sentence ends at ". " before a capital or a math span, or at a line break.
SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z\\$])|\n+")

# A sum of money: a number with a currency sign before or after it ("\\$1,000.99", "2,74 \\$", "1,000.99€").
_AMOUNT = re.compile(r"(?:\\?\$|[€£¥])[ \t]?(?P<n>\d[\d,]*(?:\.\d+)?)"
                     r"|(?<![\w.,])(?P<m>\d[\d,]*(?:\.\d+)?)[ \t]?(?:\\?\$|[€£¥])")


def money_amount(line: str) -> str | None:
    """The one number of a line, when a currency sign stands beside it and the line is not itself a value."""
    amounts = [m.group("n") or m.group("m") for m in _AMOUNT.finditer(line)]
    numbers = re.findall(r"\d[\d,]*(?:\.\d+)?", line)
    if len(amounts) == 1 and len(numbers) == 1 and parse_number(unwrap(line)) is None:
        return amounts[0]
    return None


def computed_with(value: str, working: str) -> bool:
    """Is a numeric ``value`` an operand of an equation in ``working`` ("+ 255 = 10,455")?"""
    number = unwrap(value).replace("\\$", "").strip()
    if parse_number(number) is None or not re.fullmatch(r"-?[\d,.]+", number):
        return False
    return bool(re.search(rf"(?<![\d.,]){re.escape(number)}(?![\d])[^=\n]{{0,80}}(?<![<>!])=", working))


_SIGN_OFF = re.compile(r"(?:I\s+)?hope\s+(?:it|this|that)\b[^.!?]*[.!]?|(?:please\s+)?let\s+me\s+know\b[^.!?]*[.!]?",
                       re.IGNORECASE)


_CONCLUDES = re.compile(r"(?:therefore|thus|hence|so|finally|in conclusion)\b", re.IGNORECASE)


def concluding_number(paragraph: str) -> str | None:
    """The one number of a concluding sentence in prose, sign-offs after it left out ("Therefore, there are 12
    distinct sequences that meet the conditions. I hope it is correct.", "Therefore, the error increases by
    100%."): what the working above it (displays, inline math) arrives at."""
    displays = display_spans(paragraph)
    after = paragraph[displays[-1].end:] if displays else paragraph
    sentences = [x.strip() for x in SENTENCES.split(after.strip()) if x.strip()]
    while sentences and _SIGN_OFF.fullmatch(sentences[-1]):
        sentences.pop()
    if not sentences or math_spans(sentences[-1]) or not _CONCLUDES.match(sentences[-1]):
        return None
    return lone_number(sentences[-1])


# Where an open box's math ends: the closing delimiter of the math span it sits in, or a blank line.
_OPEN_BOX_END = re.compile(r"(?<!\\)\$|\\[\])]|\n[ \t]*\n")
_NEXT_SENTENCE = re.compile(r"[.!?]\s+(?:[A-Z][a-z]|I\s)")


def open_box_body(rest: str) -> tuple[str, int] | None:
    """A box whose brace is never closed, and the text after its ``{``: its body and where it ends. A generation cut
    off inside its box, or a gold copied without its last brace, means the rest up to the end of the text, or up to
    the delimiter that closes the math around it (``$\\boxed{5$``). A blank line or a new sentence first means the box
    was left behind (an opener echoed from the instructions, "put it in \\boxed{ as asked. The answer is 5."), not
    cut off: no answer. The body is what a closed box would hold, so it can state nothing a closed box could not."""
    m = _OPEN_BOX_END.search(rest)
    if m is not None and m.group(0).startswith("\n"):
        return None
    end = m.start() if m else len(rest)
    body = rest[:end].strip()
    if not body or len(body) > 500 or _NEXT_SENTENCE.search(body):
        return None
    return body, end
