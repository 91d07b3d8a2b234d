"""Final-answer extraction from a model's full output.

Methods are tried strongest first and the first one that finds something decides; every result says which
method found it, so a trainer can see *why* a response scored as it did. Several different final answers are
kept (not collapsed to the last one): the verifier treats that as hedging.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_BOX = re.compile(r"\\(?:boxed|fbox|framebox)\s*(?:\[[^\]]*\])?\s*")
_THINK_END = "</think>"
_GSM = re.compile(r"####\s*([^\n]*)")
_PHRASE = re.compile(
    r"\banswers?\b(?:\s*\*\*)?\s*(?:is|are|:|=|would\s+be|will\s+be|of)\s*[:=]?\s*(?:\*\*)?\s*"
    r"(?P<x>[^\n]+)",
    re.IGNORECASE,
)
_BOLD = re.compile(r"\*\*(?P<x>[^*\n]{1,200})\*\*")
_DISPLAY = re.compile(r"\\\[(?P<a>.+?)\\\]|\$\$(?P<b>.+?)\$\$", re.DOTALL)
_INLINE = re.compile(r"(?<![\\$])\$(?P<a>[^$]+?)\$(?!\$)|\\\((?P<b>.+?)\\\)", re.DOTALL)
_LATEX_CMD = re.compile(r"\\(?:d?frac|sqrt|pi|cdot|times|infty|pm|left|right|begin|cup|leq|geq|circ|text)")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+)?(?![\w])|(?<![\w.])-?\.\d+")
_CHOICE = re.compile(r"\(([A-J])\)|^\s*([A-J])[.)]?\s*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[^\d\s])\.\s+(?=[A-Z])|\.\s*$")


@dataclass
class Extraction:
    """What the response gives as its final answer(s), and which method found it."""

    answers: list[str]
    method: str


def clip_tail(text: str, max_chars: int) -> tuple[str, bool]:
    """The last ``max_chars`` characters (final answers sit at the end of long outputs)."""
    if len(text) <= max_chars:
        return text, False
    return text[-max_chars:], True


def final_section(text: str) -> str:
    """Text after a closing ``</think>`` when there is something there: reasoning is not the answer."""
    if _THINK_END in text:
        after = text.rsplit(_THINK_END, 1)[1]
        if after.strip():
            return after
    return text


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """Contents of the balanced ``{...}`` group opening at ``start``, and the index after it."""
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "\\":
            continue
        if c == "{" and text[i - 1] != "\\":
            depth += 1
        elif c == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    return None


def boxed_contents(text: str) -> list[str]:
    """Every ``\\boxed{...}`` / ``\\fbox{...}`` body, nested braces kept, in order of appearance."""
    found: list[str] = []
    for m in _BOX.finditer(text):
        group = _braced(text, m.end())
        if group is not None:
            found.append(group[0])
        else:
            bare = re.match(r"[^\s$.,;]+", text[m.end():])  # \boxed 5
            if bare and m.group(0).endswith(" "):
                found.append(bare.group(0))
    return found


def _cut_phrase(x: str) -> str:
    """The answer part of the text after an "answer is" phrase: its math spans (joined when only "or"/"and"/commas
    stand between them, so a hedge stays visible), else the first sentence."""
    x = x.strip()
    if x.startswith("\\boxed"):
        return x
    spans = list(_INLINE.finditer(x)) or list(_DISPLAY.finditer(x))
    if spans and spans[0].start() == 0:
        joined = [spans[0].group("a") or spans[0].group("b") or ""]
        for prev, m in zip(spans, spans[1:]):
            between = x[prev.end():m.start()]
            if not re.fullmatch(r"\s*(?:,|;|or|and|,\s*or|,\s*and)\s*", between, re.IGNORECASE):
                break
            joined.append(between.strip() + " " + (m.group("a") or m.group("b") or ""))
        return " ".join(joined)
    cut = _SENTENCE_END.split(x, maxsplit=1)[0]
    return cut.strip()


_PLAIN_WORD = re.compile(r"(?<![\\A-Za-z{])[A-Za-z]{2,}(?![A-Za-z}])[\s:,]*")


def _math_tail(line: str) -> str:
    """The math after the last plain-English word of a line ("so we get \\dfrac{9}{7}" → "\\dfrac{9}{7}")."""
    depth, cut = 0, 0
    for m in _PLAIN_WORD.finditer(line):
        depth = line.count("{", 0, m.start()) - line.count("}", 0, m.start())
        if depth == 0 and m.group(0).strip(" :,").lower() not in ("or", "and"):
            cut = m.end()
    tail = line[cut:].strip().lstrip("=").strip()
    return tail or line


def extract(text: str, *, last_number: bool = True, choice_letters: bool = False) -> Extraction | None:
    """The response's final answer(s), or None when nothing answer-like is found."""
    section = final_section(text)
    boxes = boxed_contents(section)
    if boxes:
        return Extraction(boxes, "boxed")
    gsm = _GSM.findall(section)
    if gsm:
        return Extraction([gsm[-1].strip()], "gsm8k_hashes")
    phrases = list(_PHRASE.finditer(section))
    if phrases:
        got = _cut_phrase(phrases[-1].group("x"))
        if got:
            return Extraction([got], "answer_phrase")
    tail = section.strip()[-600:]
    bolds = _BOLD.findall(tail)
    if bolds:
        return Extraction([bolds[-1]], "bold")
    last_par = re.split(r"\n\s*\n", section.strip())[-1]
    displays = list(_DISPLAY.finditer(last_par))
    if displays:
        m = displays[-1]
        return Extraction([(m.group("a") or m.group("b")).strip()], "display_math")
    inlines = list(_INLINE.finditer(last_par))
    if inlines:
        m = inlines[-1]
        return Extraction([(m.group("a") or m.group("b")).strip()], "inline_math")
    lines = [ln.strip() for ln in section.strip().splitlines() if ln.strip()]
    last_line = lines[-1] if lines else ""
    if last_line and len(last_line) <= 300 and _LATEX_CMD.search(last_line):
        return Extraction([_math_tail(last_line)], "bare_latex")
    if choice_letters:
        letters = _CHOICE.findall(last_par)
        if letters:
            a, b = letters[-1]
            return Extraction([a or b], "choice_letter")
    if last_line and len(lines) == 1 and len(last_line) <= 120 and re.search(r"[\d\w]", last_line):
        return Extraction([last_line], "plain_text")
    if last_number:
        numbers = _NUMBER.findall(section)
        if numbers:
            return Extraction([numbers[-1]], "last_number")
    return None


_ALTERNATIVE = re.compile(
    r"\s*(?:\\(?:q?quad|text|textrm|mbox)\s*\{\s*(?:or|and)\s*\}|\\q?quad\s+|\s(?:or|and)\s|;)\s*", re.IGNORECASE
)


def split_alternatives(answer: str) -> list[str]:
    """Split "4 or 5", "1331 and 1728", "a; b" at brace depth 0: each part is a separately stated answer."""
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
        if a >= last:
            parts.append(answer[last:a])
            last = b
    parts.append(answer[last:])
    return [p.strip() for p in parts if p.strip()]
