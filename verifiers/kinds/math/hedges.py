"""Hedges written in plain prose: "I think 6, maybe 4", "Probably 14 but 4 is also possible", "So 5? Or 4.".

A response that names two different final values with hedging words hedges whether or not it uses LaTeX or an
"or": without this the last number named was compared, so the gold paid whenever it came last. Only the closing
sentences of the answer are read (the final paragraph, from the last sentence that does arithmetic on), so a single
plain answer with working before it is not a hedge. A self-correction that names a final answer ("6. Wait, it's
4", "6? No, two were eaten, so 4", "6 or 4? I'll go with 4") withdraws what came before it: only what follows the
last correction is read. Everything here is linear in the text.
"""
from __future__ import annotations

import re

from verifiers.kinds.math.normalize import canonical
from verifiers.kinds.math.spans import math_spans

# Words that leave a value open; "or" beside a value ("6 or", "or maybe 4"), not between words ("including or
# excluding"). A "?" after a value does too ("So 5? Or 4.").
_HEDGE = re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|likely|might|could|either|unsure|not\s+sure|uncertain|"
    r"(?:also|too)\s+(?:possible|plausible|likely|valid|works?|correct)|possible\s+too|alternatively)\b|\?"
    r"|(?<=[\d$})])[ \t]*,?[ \t]*\bor\b|\bor\s+(?:maybe\s+|perhaps\s+|possibly\s+|else\s+|it'?s\s+)?[-\d$\\(]",
    re.IGNORECASE,
)
# What withdraws the values before it and names the final one: a correction or a decision.
_CORRECTION = re.compile(
    r"\b(?:wait|actually|oops|hold on|scratch that|correction|i mean|sorry|no(?=[,:;.!]|\s+(?:wait|it|that|the))|"
    r"(?:i'll|i will|let's|we'll|i'd) (?:go|stick|settle) with|(?:my |the )?final answer|the answer is|"
    r"(?:that|this|it)(?:'s| is| was) (?:wrong|incorrect|not right)|i made (?:a|an) (?:mistake|error))\b",
    re.IGNORECASE,
)
# A sentence that does arithmetic: working, never a candidate list ("2 * 3 = 6", "6 - 2 gives 4").
_WORKING = re.compile(r"[\d)]\s*(?:[-+*/×÷^=]|\\(?:times|cdot|div))\s*[\d(\\]|=")
# A value in prose: a number, optionally negative, with a decimal part or a fraction; or a math span.
_VALUE = re.compile(r"(?<![\w.^])-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+)?(?![\w])(?!\.\d)")
# Where a stated value ends and a clause about it begins ("6 - possibly 4 if the eaten ones don't count").
_CLAUSE = re.compile(
    r"\b(?:because|since|as|if|assuming|given|which|where|when|depending|provided|unless|whichever|after|before|"
    r"for|per|out of|of|in|with|from|by|into|on|each|every)\b",
    re.IGNORECASE,
)
# Numbers that bound or count rather than answer ("at least 3", "more than 2 ways", "step 2").
_NOT_A_CANDIDATE = re.compile(
    r"(?:\b(?:at\s+(?:least|most)|more\s+than|less\s+than|fewer\s+than|over|under|step|case|part|option|equation|"
    r"line|page|figure|method|approach)\s*$)",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=\?)(?=\S)|\n+")


def closing_zone(paragraph: str) -> str:
    """The answer's closing words: the final sentences after the last one that does arithmetic, from the last
    correction on."""
    sentences = [s for s in _SENTENCE.split(paragraph.strip()[-2000:]) if s.strip()]  # the closing words only
    start = len(sentences)
    while start > 0 and not _does_arithmetic(sentences[start - 1]):
        start -= 1
    zone = " ".join(sentences[start:])[-400:]
    cut = 0
    for correction in _CORRECTION.finditer(zone):
        cut = correction.end()
    return zone[cut:]


def _first_words(region: str) -> str:
    """What follows a statement in its own paragraph, up to the first sentence that does arithmetic (an explanation
    after "The answer is N." is working, not candidates)."""
    words = []
    for sentence in _SENTENCE.split(re.split(r"\n[ \t]*\n", region[:2000], maxsplit=1)[0]):
        if _does_arithmetic(sentence):
            break
        words.append(sentence)
    return " ".join(words)


def _does_arithmetic(sentence: str) -> bool:
    """Working: arithmetic in prose ("2 * 3 = 6"), or math that computes ("$PM/PQ = 8/17$"), not math that only
    names a value ("$x = 18$ or $x = 19$")."""
    return bool(_WORKING.search(_without_math(sentence))
                or any("=" in sp.body and _OPERATION.search(sp.body) for sp in math_spans(sentence)))


# An operation between two terms inside math: "PM/PQ", "5+5", "2 \\cdot 3".
_OPERATION = re.compile(r"[\w)}]\s*(?:[-+*/^]|\\(?:times|cdot|div|frac))\s*[\w({\\]|\\frac")


def _without_math(sentence: str) -> str:
    """A sentence with its math spans blanked: "$x = 18$ or $x = 19$" names values, it does no arithmetic."""
    out = sentence
    for sp in reversed(math_spans(sentence)):
        out = out[:sp.start] + " " * (sp.end - sp.start) + out[sp.end:]
    return out


def plain_hedge(paragraph: str, stated: str | None = None) -> list[str]:
    """The different values the closing sentences offer with hedging words ("I think 6, maybe 4" gives 6, 4); empty
    when they offer one value, none, or no hedging word. Values are read from the sentences that hedge, and from the
    sentence before one that only continues it ("It's 6. Or perhaps 4.", "So 5? Or 4."), never from a sentence that
    states a value plainly ("Each has 2 apples. So probably 6." offers one value). With ``stated``, the paragraph is
    what follows a committed statement of that value ("The answer is 14[, but 4 is also possible.]")."""
    zone = closing_zone(paragraph) if stated is None else _first_words(paragraph)
    sentences = [s for s in _SENTENCE.split(zone) if s.strip()]
    chosen: set[int] = set()
    for i, sentence in enumerate(sentences):
        if _HEDGE.search(sentence):
            chosen.add(i)
            if i and (_CONTINUES.match(sentence) or sentences[i - 1].rstrip().endswith("?")):
                chosen.add(i - 1)
    values: list[str] = [stated] if stated is not None and chosen else []
    for i in sorted(chosen):
        for clause in _CLAUSE_END.split(sentences[i]):
            clause = _CLAUSE.split(clause, maxsplit=1)[0]
            if _DENIES.search(clause):  # "so it is not 18 or 20": values ruled out, not offered
                continue
            values += [sp.body.strip() for sp in math_spans(clause)]
            bare = _without_math(clause)
            values += [m.group(0) for m in _VALUE.finditer(bare) if not _NOT_A_CANDIDATE.search(bare[:m.start()])]
    distinct = list(dict.fromkeys(canonical(v) for v in values if canonical(v)))
    return values if len(distinct) > 1 else []


# What rules values out rather than offering them ("so it is not 18 or 20"); "not sure" still hedges.
_DENIES = re.compile(r"\b(?:not(?!\s+(?:sure|certain))|never|neither|nor|isn't|aren't|cannot|can't|rule[sd]? out|"
                     r"excludes?)\b", re.IGNORECASE)
# A sentence that only continues the one before it with another candidate.
_CONTINUES = re.compile(r"\s*(?:or|but|then again|alternatively|though|although|otherwise|else)\b", re.IGNORECASE)
_CLAUSE_END = re.compile(r"(?<!\d)\.|\.(?!\d)|[!?;]")


# A part that only adds itself to the ones before it ("also 7", "either 3").
ADDITIVE_START = re.compile(r"^\s*(?:also|either|alternatively|possibly|perhaps|maybe)\b[\s,:]*", re.IGNORECASE)
_ALTERNATIVE = re.compile(
    r"\s*(?:\\(?:q?quad|text|textrm|mbox)\s*\{\s*(?:or|and)\s*\}|\\q?quad\s+|\s(?:or|and)\s|;)\s*", re.IGNORECASE
)


# "or"/"and" glued between the end of one value and the start of the next that states a value of its own
# ("W(x)=1orW(x)=-1", "x=1orx=-1": a "\\text{or}" rendered without its spaces, or a normaliser that dropped them).
# Never inside a word ("2order": no sign or digit follows); the look-ahead is bounded, so this stays linear.
_GLUED = re.compile(r"(?<=[\d)\]}$])(or|and)(?=[A-Za-z(\\\[{$-][^\s=\d]{0,40}[=\d])")


def spaced_connectives(text: str) -> str:
    """Glued connectives read as words: "x=1orx=-1" is "x=1 or x=-1"."""
    return _GLUED.sub(r" \1 ", text) if "or" in text or "and" in text else text


def split_alternatives(answer: str) -> list[str]:
    """Split "4 or 5", "1331 and 1728", "a; b" at brace depth 0: each part is a separately stated answer."""
    answer = spaced_connectives(answer)
    parts, depth, last = [], 0, 0
    spans = []
    for i, c in enumerate(answer):
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif depth == 0 and c in " \\;":
            m = _ALTERNATIVE.match(answer, i)
            if m and m.end() > i and m.group(0).strip(" ") and (answer[i] != " " or m.group(0).strip()):
                spans.append((i, m.end()))
    for a, b in spans:
        if a < last:
            continue
        if answer[last:a].rstrip().endswith(",") and re.search(r"and|quad", answer[a:b], re.IGNORECASE):
            continue  # "19, 46, and 82", "a = 1, \\quad b = 2": the next item of one list, not another answer
        parts.append(answer[last:a])
        last = b
    parts.append(answer[last:])
    return [ADDITIVE_START.sub("", p.strip(), count=1) for p in parts if p.strip()]
