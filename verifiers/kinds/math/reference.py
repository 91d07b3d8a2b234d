"""The answer a reference states: a bare answer as it is, or what a worked solution boxes, marks with ``####`` or
concludes with, read the way a response is read."""
from __future__ import annotations

import re

from verifiers.kinds.math.extract import (
    SENTENCES,
    STATES,
    WORD,
    box_statements,
    extract,
    last_paragraph,
    split_alternatives,
)
from verifiers.kinds.math.normalize import canonical, is_prose, lone_number, single_escaped, split_top_level
from verifiers.kinds.math.spans import math_spans

# What stands between the boxes or spans of a list: punctuation, "and"/"or", spacing, the math delimiters around
# each box ("$\\boxed{1}$ and $\\boxed{-2}$") and a divider ("\\boxed{35} ++++++ \\boxed{4}", "\\boxed{1} | \\boxed{2}":
# a run of a symbol, never one operator between two boxes); a unit or noun may name what a box counts ("\\boxed{1}
# papers and").
_SEPARATORS = re.compile(r"(?:\s*[a-z]{2,}(?:\s+[a-z]{2,})?(?=\s*(?:[,;]|and\b|or\b)))?"  # "\\boxed{1} papers and"
                         # possessive: a run of one divider symbol is read one way, never split (exponential)
                         r"[\s,;.$]*+(?:(?:\\[()\[\]]|and|or|\\text\{\s*(?:and|or)\s*\}|\\q?quad|\|++|([-+*=~_#/])\1++)"
                         r"[\s,;.$]*+)*+",
                         re.IGNORECASE)


def reference_answer(reference: str) -> str:
    """The answer a reference states. A bare answer stays as it is; a worked solution gives its last ``\\boxed{}``
    (adjacent boxes, "\\boxed{2} and \\boxed{5}", give all of them: a set of answers) or what follows ``####``;
    a list of math spans ("$f(x)=x$, $f(x)=2-x$") gives their contents as one list; a sentence that states a math
    span ("The only solution is \\((a, b) = (0, 0)\\).") gives that span. A named tuple "(p, q) = (3, 2)" gives its
    values."""
    text = single_escaped(reference.strip())
    boxes = box_statements(text)
    if boxes:
        group = [boxes[-1]]
        for prev in reversed(boxes[:-1]):
            if not _SEPARATORS.fullmatch(text[prev.end:group[0].start]):
                break
            group.insert(0, prev)
        # several boxes are several solutions: a set
        text = f"\\{{{', '.join(b.text.strip() for b in group)}\\}}" if len(group) > 1 else group[0].text
    elif "####" in text:
        text = text.rsplit("####", 1)[1]
    else:
        spans = math_spans(text)
        if spans:
            outside = [text[:spans[0].start], *(text[a.end:b.start] for a, b in zip(spans, spans[1:])),
                       text[spans[-1].end:]]
            if all(_SEPARATORS.fullmatch(part) for part in outside):
                text = ", ".join(s.body.strip() for s in spans) if len(spans) > 1 else spans[0].body
            elif len(spans) and STATES.search(text[:spans[-1].start]) and _SEPARATORS.fullmatch(outside[-1]):
                text = spans[-1].body
    if _worked_solution(text):
        text = _solution_answer(text) or text
    return _named_tuple_values(text.strip())


# How a worked solution states its answer: a committed statement or a closing sentence that ends in a value.
_SOLUTION_METHODS = frozenset({"boxed", "gsm8k_hashes", "answer_phrase", "concluding_sentence", "closing_sentence"})


def _worked_solution(text: str) -> bool:
    """A reference written as prose (a worked solution, a closing sentence), not as a value. Only its committed
    statements or a closing sentence that ends in a value are read ("No, it is not possible ..." or "Player B wins
    for \\(n \\geq 4\\)" state none and stay as they are)."""
    return is_prose(text) and len(WORD.findall(re.sub(r"\\[A-Za-z]+", " ", text))) >= 6


def _solution_answer(text: str) -> str | None:
    """The answer a worked solution states, read the way a response is read; several different committed answers
    ("x = 1 and x = -2") are its list of answers."""
    found = extract(text, last_number=False)
    if found is None or found.method not in _SOLUTION_METHODS:
        sentences = [x for x in SENTENCES.split(last_paragraph(text)) if x.strip()]
        # a closing sentence with exactly one number states it: "Therefore, 28% of the students passed."
        return lone_number(sentences[-1]) if sentences else None
    parts: dict[str, str] = {}
    for answer in found.answers:
        for part in split_alternatives(answer) or [answer]:
            if canonical(part):
                parts.setdefault(canonical(part), part.strip())
    return ", ".join(parts.values()) or None


_NAME_TUPLE = re.compile(r"^\s*\(\s*(?:\\?[A-Za-z]+(?:_\{?\w+\}?)?\s*,\s*)+\\?[A-Za-z]+(?:_\{?\w+\}?)?\s*\)\s*$")


def _named_tuple_values(text: str) -> str:
    """``(p, q) = (3, 2)`` → ``(3, 2)``: the names only say which value is which, as the tuple's order does."""
    sides = split_top_level(text, "=")
    if len(sides) == 2 and _NAME_TUPLE.match(sides[0]) and sides[1].lstrip().startswith(("(", "\\left(")):
        return sides[1]
    return text
