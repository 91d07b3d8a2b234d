"""Final-answer extraction from a model's full output.

Committed final-answer statements (every ``\\boxed{}``, ``#### N``, "the answer is …"/"Answer: …", a bold answer
on its own line) are collected together, in order, so a response cannot state one answer in a box and another in a
sentence; a later statement supersedes the earlier ones only after an explicit retraction ("wait", "actually",
"that is wrong", …). Tentative candidates ("it could be …", "or maybe …") count after the last committed statement,
or as the answer when there is none. When nothing is stated, weaker methods are tried strongest first (bold, display
math, inline math, bare LaTeX, plain text, last number). Every result says which method found it, so a trainer can
see *why* a response scored as it did. Several different final answers are kept (not collapsed to the last one):
the verifier treats that as hedging.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from verifiers.kinds.math import turns
from verifiers.kinds.math.closing import SENTENCES as SENTENCES
from verifiers.kinds.math.closing import computed_with, concluding_number, money_amount, open_box_body
from verifiers.kinds.math.hedges import ADDITIVE_START, plain_hedge, spaced_connectives
from verifiers.kinds.math.hedges import split_alternatives as split_alternatives
from verifiers.kinds.math.normalize import PLAIN_FUNCS, canonical, lone_number, unwrap
from verifiers.kinds.math.numeric import parse_number
from verifiers.kinds.math.spans import Span, display_spans, escape_currency, inline_first, inline_spans, math_spans

_BOX = re.compile(r"\\(?:boxed|fbox|framebox)\s*(?:\[[^\]]*\])?\s*")
# Possessive whitespace and bounded captures keep these linear on hostile floods ("answer:" + 20k newlines,
# "the answer is " * 10k): each match reads a bounded stretch, and no two "\s*" runs share characters.
_GSM = re.compile(r"####[ \t]*+([^\n]{0,1000})")
_PHRASE = re.compile(
    r"\banswers?\b(?:\s*+\*\*)?\s*+(?:is|are|:|=|would\s++be|will\s++be|of)\s*+[:=]?\s*+(?:\*\*)?\s*+"
    r"(?P<x>[^\n]{1,1000})",
    re.IGNORECASE,
)
_BOLD = re.compile(r"\*\*(?P<x>[^*\n]{1,200})\*\*")
_A_COLON = re.compile(r"^[ \t]*A[ \t]*:[ \t]*+(?P<x>[^\n]{1,200}?)[ \t.]*$", re.MULTILINE)
_LATEX_CMD = re.compile(r"\\(?:d?frac|sqrt|pi|cdot|times|infty|pm|left|right|begin|cup|leq|geq|circ|text)")
# A number as prose writes it: thousands grouped by ",", "{,}", "\\," or one space ("10 000"), a decimal part, a slash.
_NUMBER = re.compile(
    r"(?<![\w.^])-?(?:\d{1,3}(?:(?:,|\{,\}|,\\!|\\,|\\ | )\d{3})+(?![\d])|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?"
    r"(?:(?![\w])|(?=[a-zµ]{1,2}[²³](?![\w])))"  # a unit squared or cubed may follow: "1,000.99m²"
    r"|(?<![\w.])-?\.\d+"
)
_CHOICE = re.compile(r"\(([A-J])\)|^\s*([A-J])[.)]?\s*$", re.MULTILINE)
# A sentence ends at ". " before a capital (after a digit too: "is 143. I hope it is correct"), never inside 3.14.
# What a text says just before the value it states ("… is", "… equals", "x =").
STATES = re.compile(r"(?:\bis|\bare|\bequals?|:|=)\s*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[^\d\s])\.\s+(?=[A-Z])|(?<=\d)\.\s+(?=[A-Z][a-z]|I\s)|\.\s*$")


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


def own_turn(section: str) -> str:
    """``turns.own_turn`` with this module's reading of a stated answer."""
    return turns.own_turn(section, states_answer=lambda prefix: bool(committed_statements(prefix)))


def boxed_contents(text: str) -> list[str]:
    """Every closed ``\\boxed{...}`` / ``\\fbox{...}`` body, nested braces kept, in order of appearance."""
    return [st.text for st in box_statements(text, open_last=False)]


_LIST_GLUE = re.compile(r"\s*(?:,|;|or|and|,\s*or|,\s*and)\s*", re.IGNORECASE)


def _joined(x: str, spans: list[Span], first: int) -> str:
    """Span ``first`` and the spans after it that only "or"/"and"/commas separate from it, as one answer
    ("$x = 5$ and $x = 15$" states two values; keeping them together keeps a hedge visible and a list whole)."""
    joined, glue = [spans[first].body.strip().rstrip(",;").strip()], []
    for prev, m in zip(spans[first:], spans[first + 1:]):
        between = x[prev.end:m.start]
        if not _LIST_GLUE.fullmatch(between):
            break
        joined.append(m.body.strip().rstrip(",;").strip())
        glue.append(between)
    # One connective for the whole run ("$-1$, $2$, and $-2$" is three values): "or" when any says so (a hedge
    # stays visible), else "and"; each value then stands alone, never "x = 2 ," with a stray comma.
    connective = " or " if any(re.search(r"\bor\b", g, re.IGNORECASE) for g in glue) else " and "
    return connective.join(joined)


def _cut_phrase(x: str) -> str:
    """The answer part of the text after an "answer is" phrase: its math spans (joined when only "or"/"and"/commas
    stand between them, so a hedge stays visible), else the first sentence."""
    x = x.strip()
    if x.startswith("\\boxed"):
        return x
    spans = inline_first(x)
    if spans and spans[0].start == 0:
        return _joined(x, spans, 0)
    cut = _SENTENCE_END.split(x, maxsplit=1)[0].strip()
    stated = _stated_span(cut)
    if stated is None and not answer_like(cut):
        stated = _restated_value(cut)
    return stated if stated is not None else cut


# A sentence that restates the quantity before giving its value: "The largest $n$ is 34", "The maximum number of
# points that can be chosen is 19", "The answer to the problem is -\frac{3}{8}" (Minerva's closing line without "the
# final answer is"). It opens with a determiner, so "correct since x is 5" (a verification) is not one.
_RESTATES = re.compile(r"^(?:the|this|our|its|his|her|their|each|a|an)\s", re.IGNORECASE)
_IS = r"\b(?:is|are|equals?|was|were|be)\b"
_LAST_IS = re.compile(rf"{_IS}\s+(?P<x>(?:(?!{_IS})[^\n]){{1,200}})$", re.IGNORECASE)


def _restated_value(sentence: str) -> str | None:
    """The value a sentence that restates its quantity ends with (see ``_RESTATES``), or None."""
    if not _RESTATES.match(sentence):
        return None
    m = _ENDS_WITH_NUMBER.search(sentence)
    if m and not any(w.lower() in _NOT_AFTER for w in m.group("rest").split()):
        return m.group("x")
    m = _LAST_IS.search(sentence.rstrip(" .!"))
    if m is None:
        return None
    value = m.group("x").strip()
    return value if answer_like(value) else None


def _stated_span(sentence: str) -> str | None:
    """The math a sentence ends by stating ("The smallest value of \\(n\\) such that \\(A_n \\geq K\\) is
    \\(n = 10\\)."): its last span (with the spans "and"/"or"/commas join to it) when "is"/"are"/":"/"=" leads
    into it and nothing but punctuation follows; None otherwise."""
    spans = inline_first(sentence)
    if not spans or not re.fullmatch(r"[\s.,;:!]*", sentence[spans[-1].end:]):
        return None
    first = len(spans) - 1
    while first > 0 and _LIST_GLUE.fullmatch(sentence[spans[first - 1].end:spans[first].start]):
        first -= 1
    if not STATES.search(sentence[:spans[first].start]):
        return None
    return _joined(sentence, spans, first)


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


_PLAIN_MATH = re.compile(r"(?=.*\d)[\w\s+\-*/^().,=<>\[\]{}|!]+")


def _plain_math_tail(line: str) -> bool:
    """A line that ends in plain-text math after its words ("So we get 6 - 5i", "The roots are 1, -2")."""
    tail = _math_tail(line)
    if tail == line or not _PLAIN_MATH.fullmatch(tail) or WORD.search(tail):
        return False
    prefix = line[:line.rfind(tail)]
    word = re.search(r"([A-Za-z]+)[\s:,]+$", prefix)  # "get 6 - 5i", never "sqrt(1/n)" (a function's name)
    return word is not None and word.group(1).lower() not in _FUNCTION_NAMES


_FUNCTION_NAMES = frozenset((*PLAIN_FUNCS, "sqrt", "pi"))


# Between two statements, these withdraw the earlier one (a self-correction, not a second answer).
_RETRACTION = re.compile(
    r"\b(?:wait|actually|oops|hold on|scratch that|on second thought|correction|let me (?:re-?check|re-?calculate|"
    r"re-?examine|re-?consider|re-?do|correct|fix)|(?:i|we) made (?:a|an) (?:mistake|error)|mistake|miscalculat\w*|"
    r"(?:that|this|it)(?:'s| is| was) (?:wrong|incorrect|not (?:right|correct))|contradict\w*|"
    r"upon (?:closer|further|careful) (?:examination|inspection|review|consideration|reflection)|re-?evaluat\w*|"
    r"reconsider\w*|(?:i|we) was wrong|(?:i|we) were wrong)\b",
    re.IGNORECASE,
)
# A statement that adds to the previous ones rather than replacing them.
_ADDITIVE_BEFORE = re.compile(r"(?:\balso|\balternatively|\bor|\banother)\b[^.\n]{0,30}$", re.IGNORECASE)
# Candidates the response entertains without committing to them.
_TENTATIVE = re.compile(
    r"\b(?:could|might|may)\s++(?:also\s+|possibly\s+|well\s+|instead\s+|even\s+)?be\s++(?P<x>[^\n;]{1,300})"
    r"|\b(?:or\s+)?(?:maybe|perhaps|possibly)\s++(?:(?:it|the answer)(?:'s|\s+is)\s+)?(?P<y>[^\n;]{1,300})",
    re.IGNORECASE,
)
# A heading that names the answer, with the value on the next lines ("### Final Answer\n\n$4$", "**Final Answer**\n5").
_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?[ \t]*(?:the[ \t]+)?(?:final[ \t]+)?answer[ \t]*(?:\*\*)?[ \t]*\n"
    r"(?:[ \t]*\n){0,3}(?P<x>[^\n]{1,300})",
    re.MULTILINE | re.IGNORECASE,
)
_STANDALONE_BOLD = re.compile(r"^[ \t]*(?:[-*>][ \t]+)?\*\*(?P<x>[^*\n]{1,200})\*\*[ \t.]*$", re.MULTILINE)
# "check our answer: …" shows a verification, not an answer.
_CHECKING = re.compile(
    r"\b(?:check|checking|verify|verifying|confirm|confirming|test|testing|plug|plugging|substitut\w*)\b[^.\n]*$",
    re.IGNORECASE,
)
# What an "answer is" phrase says when it is not stating a value ("the answer is correct").
_NOT_VALUES = frozenset(
    "correct incorrect right wrong reasonable plausible consistent valid invalid confirmed verified indeed not clear "
    "obvious unique same different below above follows following given unchanged accurate sensible fine good ok "
    "okay as that this then therefore thus so the an in to approximately about roughly around exactly presented shown "
    "placed written expressed".split()
)
_VERDICT = re.compile(r"(?:not\s+)?(?:correct|incorrect|right|wrong|valid|invalid|verified|confirmed|consistent|"
                      r"reasonable|plausible|indeed|accurate)\b", re.IGNORECASE)
# Where a stated value ends and a sentence about it begins ("4 or 5, depending on interpretation").
_TRAILING_CLAUSE = re.compile(
    r"[,;]?\s+(?:depending|since|because|as|if|assuming|given|which|where|when|so|but|though|although|based|"
    r"according|provided|unless|whichever)\b",
    re.IGNORECASE,
)
_DERIVATION = re.compile(r"=|\\(?:equiv|approx|Rightarrow|implies)\b")
_MARKED = ("boxed", "gsm8k_hashes")  # statements a response marks as final: strict, never superseded by working
WORD = re.compile(r"(?<![\\A-Za-z{])[A-Za-z]{2,}(?![A-Za-z}])")
_CONNECTIVES = frozenset({"or", "and", "either"})


@dataclass
class Statement:
    """One place where the response states a final answer."""

    start: int
    end: int
    text: str
    method: str
    additive: bool = False
    derived: bool = False  # its value ends a computation ("45/125 = 9/25"): it builds on what came before


def answer_like(text: str) -> bool:
    """Does this read as a value (a number, math, a one-word text answer) rather than a sentence about one?"""
    body = unwrap(text)
    if not canonical(body) or not re.search(r"[A-Za-z0-9]", body):
        return False
    if parse_number(body) is not None:
        return True
    words = [w.lower() for w in WORD.findall(re.sub(r"\\[A-Za-z]+", " ", body)) if w.lower() not in _CONNECTIVES]
    if not words:
        return True
    return len(words) == 1 and len(body) <= 40 and words[0] not in _NOT_VALUES


def _pure_value(text: str) -> bool:
    """A bold line that is only a value ("**42**"), not a heading ("**Case 1: x > 0**", "**Step 2**")."""
    body = unwrap(text)
    return answer_like(body) and not body.endswith(":") and not WORD.search(re.sub(r"\\[A-Za-z]+", " ", body))


def _phrase_statements(section: str) -> list[Statement]:
    """Every "answer is …" / "Answer: …" that states a value; a phrase ends where the next one starts, so
    "Answer: The answer is 5" and "the answer is 5. Actually the answer is 6" are each read correctly."""
    matches = []
    m = _PHRASE.search(section)
    while m:
        matches.append(m)
        m = _PHRASE.search(section, m.start("x"))
    out = []
    for m, nxt in zip(matches, [*matches[1:], None]):
        start = m.start("x")
        x = section[start:min(m.end("x"), nxt.start()) if nxt else m.end("x")]
        if x.lstrip().startswith(("\\[", "$$")):  # "the final answer is\n\\[\n9\n\\]": the display is the value
            displays = display_spans(section[start:start + 4000])
            if displays and not section[start:start + displays[0].start].strip():
                x = section[start:start + displays[0].end]
        if _BOX.search(x) or _CHECKING.search(section, max(0, m.start() - 30), m.start()):
            continue  # "the answer is \\boxed{5}" (the box is the statement); "we check our answer: 17*44 = 748"
        additive = bool(ADDITIVE_START.match(x))
        got = _TRAILING_CLAUSE.split(_cut_phrase(ADDITIVE_START.sub("", x, count=1)), maxsplit=1)[0].strip()
        if got:
            at = x.find(got)
            end = start + (at + len(got) if at >= 0 else len(got))
            value = stated_value(got)
            out.append(Statement(start, end, value, "answer_phrase", additive, derived=value != got))
    return out


_LINE_END = re.compile(r"(?:\*\*)?[ \t]*(?:\n|$)")


def _ends_line_after_answer(section: str) -> bool:
    """Whether some "answer" (any case) ends its line, as a heading's does."""
    low = section.lower()
    at = low.find("answer")
    while at >= 0:
        if _LINE_END.match(section, at + 6):
            return True
        at = low.find("answer", at + 6)
    return False


def _heading_statements(section: str) -> list[Statement]:
    """The value under a "Final Answer" heading: a display, or the next line read as an "answer is" phrase."""
    out: list[Statement] = []
    if not _ends_line_after_answer(section):
        return out  # the common case, found with str.find instead of a scan of every line
    for m in _HEADING.finditer(section):
        start = m.start("x")
        x = m.group("x")
        if _BOX.search(x):
            continue  # the box is the statement
        if x.lstrip().startswith(("\\[", "$$")):
            displays = display_spans(section[start:start + 4000])
            if not displays or section[start:start + displays[0].start].strip():
                continue
            end = start + displays[0].end
            if _BOX.search(section, start, end):
                continue
            value = displays[0].body.strip()
        else:
            value = _TRAILING_CLAUSE.split(_cut_phrase(x), maxsplit=1)[0].strip()
            end = m.end("x")
        if value and answer_like(value):
            out.append(Statement(start, end, stated_value(value), "answer_phrase"))
    return out


def _closing_braces(text: str) -> dict[int, int]:
    """Index of each unescaped ``{`` → index of its matching ``}``, in one pass with a stack (an unclosed brace has
    no entry). Rescanning from every box opening instead is quadratic on a flood of ``\\boxed{``."""
    closing: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(r"(?<!\\)[{}]", text):
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            closing[stack.pop()] = m.start()
    return closing


def box_statements(section: str, *, open_last: bool = True) -> list[Statement]:
    """Every ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces kept), and ``\\boxed 5``, in order; linear time. With
    ``open_last``, the last box, left open at the end of the text (a generation cut off, a gold copied without its
    brace), holds the rest of the text (``open_box_body``)."""
    out = []
    closing: dict[int, int] | None = None
    boxes = list(_BOX.finditer(section))
    for k, m in enumerate(boxes):
        if section.startswith("{", m.end()):
            if closing is None:
                closing = _closing_braces(section)
            end = closing.get(m.end())
            if end is not None:
                out.append(Statement(m.start(), end + 1, section[m.end() + 1:end], "boxed"))
            elif open_last and k == len(boxes) - 1 and (opened := open_box_body(section[m.end() + 1:])) is not None:
                out.append(Statement(m.start(), m.end() + 1 + opened[1], opened[0], "boxed"))
        else:
            bare = re.match(r"[^\s$.,;]{1,200}", section[m.end():m.end() + 200])  # \boxed 5
            if bare and m.group(0).endswith(" "):
                out.append(Statement(m.start(), m.end() + bare.end(), bare.group(0), "boxed"))
    return out


def committed_statements(section: str) -> list[Statement]:
    """Boxes, ``#### N``, value-stating answer phrases and bold answers on their own line, in order, with every
    statement that an explicit retraction withdrew left out. An empty box is an echo of the instructions
    ("put it within \\boxed{}"), not an answer, when the response states one elsewhere."""
    found = box_statements(section)
    found += [Statement(m.start(), m.end(), m.group(1).strip(), "gsm8k_hashes") for m in _GSM.finditer(section)
              if _pure_value(m.group(1))]  # "#### 42", not a markdown heading "#### Step 2: …"
    phrases = _phrase_statements(section)
    marked = bool(found)
    # Beside a box or "####", a phrase counts when it states math ("the answer is 5"), not a word ("… is yes").
    found += [p for p in phrases if answer_like(p.text) and not (marked and text_only(p.text))]
    found += _heading_statements(section)
    found += [Statement(m.start(), m.end(), m.group("x").strip(), "bold") for m in _STANDALONE_BOLD.finditer(section)
              if _pure_value(m.group("x"))]
    found += [Statement(m.start("x"), m.end("x"), m.group("x").strip(), "answer_phrase")
              for m in _A_COLON.finditer(section) if _pure_value(m.group("x"))]  # few-shot "Q: … A: 42"
    found.sort(key=lambda st: st.start)
    for st in found:
        st.additive = st.additive or bool(_ADDITIVE_BEFORE.search(section[max(0, st.start - 40):st.start]))
    kept: list[Statement] = []
    unmarked = 0  # how many of ``kept`` a later derivation would drop: filtering only then keeps long runs linear
    for st in found:
        between = section[kept[-1].end:st.start] if kept else ""
        if kept and not st.additive:
            if _RETRACTION.search(between):
                kept, unmarked = [], 0
            elif unmarked and (st.derived or _DERIVATION.search(between)):
                # a sentence's value that later working builds on is a sub-result
                kept, unmarked = [k for k in kept if k.method in _MARKED], 0
            # boxes that the working before a closing statement computes with were steps ("\\boxed{255} …
            # 200 + 255 = 455. Final Answer: 455"); between two boxes, boxes stay strict
            if st.method not in _MARKED:
                steps = [id(k) for k in kept[-8:] if k.method in _MARKED
                         and computed_with(k.text, section[k.end:min(st.start, k.end + 2000)])]
                kept = [k for k in kept if id(k) not in steps]
        kept.append(st)
        unmarked += st.method not in _MARKED
    remarks = [p for p in phrases if not _VERDICT.match(p.text)]  # "so our answer is correct" states no answer
    if not kept and remarks:  # only sentence-like phrases: the last one, as stated
        kept = [remarks[-1]]
    if any(canonical(k.text) for k in kept):
        kept = [k for k in kept if canonical(k.text)]
    return kept


def text_only(text: str) -> bool:
    body = unwrap(text)
    return parse_number(body) is None and bool(WORD.search(re.sub(r"\\[A-Za-z]+", " ", body)))


def stated_value(text: str) -> str:
    """The value a computation states: the last side of ``P(6,5) = 6!/1! = 720`` or of ``45/125 = 9/25``; an
    equation that names something (``x = 5``, ``y = 2x + 1``) stays whole."""
    if len(split_alternatives(text)) > 1:
        return text
    sides = [part.strip() for part in re.split(r"(?<![<>!\\])=(?!=)", text)]
    if len(sides) < 2 or not sides[-1] or not answer_like(sides[-1]) or _depth_changes(text):
        return text
    if len(sides) > 2 or not re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", sides[0])):
        return sides[-1]
    return text


def _depth_changes(text: str) -> bool:
    """An "=" inside braces or brackets (a set, a tuple of equations) is not a top-level chain."""
    depth = 0
    for c in text:
        depth += c in "{(["
        depth -= c in "})]"
        if c == "=" and depth:
            return True
    return False


def tentative_answers(region: str) -> list[str]:
    """Values the region only entertains: "it could be 4", "it could also be 5", "or maybe 6"."""
    matches = []
    m = _TENTATIVE.search(region)
    while m:
        matches.append(m)
        m = _TENTATIVE.search(region, m.end() - len(m.group("x") or m.group("y") or ""))
    out = []
    for m, nxt in zip(matches, [*matches[1:], None]):
        start = m.start("x") if m.group("x") else m.start("y")
        text = region[start:min(m.end(), nxt.start()) if nxt else m.end()]
        got = _cut_phrase(ADDITIVE_START.sub("", text, count=1)).rstrip(" ,;")
        got = _TRAILING_CLAUSE.split(got, maxsplit=1)[0].strip()
        if got and answer_like(got) and not text_only(got):  # "may be rotated" is not a candidate answer
            out.append(stated_value(got))
    return out


def _method(stated: list[Statement]) -> str:
    for method in ("boxed", "gsm8k_hashes", "answer_phrase", "bold"):
        if any(st.method == method for st in stated):
            return method
    return stated[-1].method


def extract(text: str, *, last_number: bool = True, choice_letters: bool = False) -> Extraction | None:
    """The response's final answer(s), or None when nothing answer-like is found."""
    section = own_turn(escape_currency(turns.final_section(text)))
    stated = committed_statements(section)
    if stated:
        after = (tentative_answers(section[stated[-1].start:]) or closing_alternatives(section[stated[-1].end:])
                 or _hedged_after(section[stated[-1].end:], [st.text for st in stated]))
        return Extraction([st.text for st in stated] + after, _method(stated))
    hedged = closing_alternatives(section) or plain_hedge(last_paragraph(section))
    if hedged:
        return Extraction(hedged, "closing_sentence")
    found = _weak_extraction(section, last_number=last_number, choice_letters=choice_letters)
    last_par = last_paragraph(section)
    candidates = [part for t in tentative_answers(last_par) for part in (split_alternatives(t) or [t])]
    if len(set(map(canonical, candidates))) > 1:  # "It could be 4; it could also be 5."
        return Extraction(candidates + (found.answers if found else []), "tentative")
    return found


def _hedged_after(region: str, stated: list[str]) -> list[str]:
    """Other values the last statement's closing sentences offer with hedging words ("The answer is 14, but 4 is
    also possible", "\\boxed{14}, or perhaps 4")."""
    keys = {canonical(stated_value(s)) for s in stated}
    return [v for v in plain_hedge(region, stated[-1])[1:] if canonical(v) not in keys]


# What leads into the candidates of a closing sentence ("It is 18 or 19", "Probably 6 (or 8).", "I think it's 101,
# or maybe 91", "Either 9 or 10, depending on how we count", "so -9 or 1"); the sentence's start leads too ("29 or 3").
_OR_LEAD = re.compile(
    r"\b(?:is|are|be|was|were|equals?|either|probably|maybe|perhaps|possibly|likely|so|thus|hence|therefore|"
    r"gets?|got|gives?|answer)\b|'s\b|=|:",
    re.IGNORECASE,
)
_OR = re.compile(r"[ \t]*,?[ \t]*\(?[ \t]*\bor\b[ \t]+(?:maybe[ \t]+|perhaps[ \t]+|possibly[ \t]+|else[ \t]+)?",
                 re.IGNORECASE)
_VAGUE = re.compile(r"^(?:about|around|approximately|roughly|either|probably|maybe|perhaps|possibly|likely)\s+",
                    re.IGNORECASE)
# A part that is a value: a number, math, a command; never a bound ("3 or more") or a word.
_VALUE_PART = re.compile(r"[\d\\$]")


def closing_alternatives(region: str) -> list[str]:
    """Two or more different candidate values in the region's closing sentence, however they are written (with or
    without math markup): a hedge, as "The answer is 18 or 19" is. Empty when the closing sentence offers none."""
    tail = region[-400:].strip()
    if not tail:
        return []
    sentences = [x for x in SENTENCES.split(tail[tail.rfind("\n") + 1:].strip()) if x.strip()]
    last = spaced_connectives(sentences[-1].strip()) if sentences else ""
    first_or = _OR.search(last)
    if first_or is None:
        return []
    inside = [(sp.start, sp.end) for sp in math_spans(last)]
    leads = [0] + [m.end() for m in _OR_LEAD.finditer(last, 0, first_or.start())
                   if not any(a < m.start() < b for a, b in inside)]  # never split a span: "$x = 1$ or $x = 2$"
    for lead in leads:
        tail = _TRAILING_CLAUSE.split(last[lead:], maxsplit=1)[0].strip().rstrip(".!)").strip()
        parts = [unwrap(p.strip(" ,;()")) for p in _OR.split(_VAGUE.sub("", tail, count=1))]
        if len(parts) > 1 and all(_VALUE_PART.search(p) and (answer_like(p) and not text_only(p) or _COUNT.match(p))
                                  for p in parts):
            return parts if len({canonical(p) for p in parts}) > 1 else []
    return []


_ARROW = re.compile(
    r"^[ \t]*(?:=+>|->|⇒|→|⟹|\\(?:Rightarrow|implies|Longrightarrow|to)(?![A-Za-z]))[ \t]*(?P<x>[^\n]{1,300})$"
)


def _weak_extraction(section: str, *, last_number: bool, choice_letters: bool) -> Extraction | None:
    """When no final answer is stated: the strongest other signal of one."""
    tail = section.strip()[-600:]
    bolds = [b for b in _BOLD.findall(tail) if not b.rstrip().endswith(":")]  # "**Conclusion:**" is a heading
    if bolds:
        return Extraction([bolds[-1]], "bold")
    end = section.rstrip()[-400:]
    arrow = _ARROW.match(end[end.rfind("\n") + 1:])
    if arrow:  # "=> 8", "\\Rightarrow x = 5": the value the working arrives at
        value = _cut_phrase(arrow.group("x"))
        if answer_like(value):
            return Extraction([stated_value(value)], "arrow")
    closing = re.split(r"\n[ \t]*\n", end)[-1].strip()
    if len(closing) <= 120 and len(closing) < len(end.strip()) and "\n" not in closing and _pure_value(closing) and (
            choice_letters or not _LONE_SYMBOL.fullmatch(unwrap(closing))):
        return Extraction([closing], "last_line")  # a value alone in the closing paragraph: "...\n\n(-2,1)"
    last_par = last_paragraph(section)
    stated = _concluding_value(last_par) or concluding_number(last_par)
    if stated:
        return Extraction([stated], "concluding_sentence")
    displays = display_spans(last_par)
    concluding = _concluding_inline(last_par, displays[-1].end if displays else 0)
    if concluding:
        return Extraction([concluding], "inline_math")
    if displays:
        return Extraction([displays[-1].body.strip()], "display_math")
    # Unless a choice letter is expected, a lone letter here names the unknown ("the values of x that satisfy the
    # equation"), not an answer: only a stated answer may be a bare letter. A closing paragraph that only names
    # unknowns states no answer; reading on to an earlier number would pick a step's number.
    spans = inline_spans(last_par)
    inlines = [s for s in spans if choice_letters or not _LONE_SYMBOL.fullmatch(s.body.strip())]
    if inlines:
        return Extraction([_last_list(last_par, inlines).strip()], "inline_math")
    if spans:
        return None
    lines = [ln.strip() for ln in section.strip().splitlines() if ln.strip()]
    last_line = lines[-1] if lines else ""
    if last_line and len(last_line) <= 300 and (_LATEX_CMD.search(last_line) or _plain_math_tail(last_line)):
        return Extraction([_math_tail(last_line)], "bare_latex")
    if choice_letters:
        letters = _CHOICE.findall(last_par)
        if letters:
            a, b = letters[-1]
            return Extraction([a or b], "choice_letter")
    if last_line and len(lines) == 1 and len(last_line) <= 120 and re.search(r"[\d\w]", last_line):
        amount = money_amount(last_line)
        if amount is not None:
            return Extraction([amount], "plain_text")  # "Soucis : 2,74 $ a..": the one sum of money it names
        if answer_like(last_line) or lone_number(last_line) is not None:
            return Extraction([last_line], "plain_text")
    if last_number:
        numbers = _NUMBER.findall(section)
        if numbers:
            return Extraction([numbers[-1]], "last_number")
    return None


def last_paragraph(section: str) -> str:
    """The last paragraph that holds any math or number: a closing remark ("This completes the solution.") is not
    where the answer is."""
    paragraphs = re.split(r"\n\s*\n", section.strip())
    for par in reversed(paragraphs):
        if re.search(r"[\d$\\]", par):
            return par
    return paragraphs[-1]


_ENDS_WITH_NUMBER = re.compile(
    r"(?:\bis|\bare|\bbe|\bequals?|=|:)\)?\s*(?:\\\$\s*)?(?P<x>-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?\\?%?)"
    r"(?P<rest>(?:\s+[A-Za-z][a-z]*(?:\^\{?[23]\}?)?){0,2})\s*[.!]?\s*$"
)
# "AB = 4 and CD = 5.": several named values that end a sentence, stated together.
_NAMED_VALUE = r"(?<![\w|])[A-Za-z|][\w|()']{0,12}\s*=\s*-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?"
_NAMED_VALUES = re.compile(rf"(?P<x>{_NAMED_VALUE}(?:\s*(?:,|;|\band\b|,\s*and\b)\s*{_NAMED_VALUE})+)\s*[.!]?\s*$")
# "So he needs 1 paper and 2 bins.": several counted quantities that end a sentence, stated together (a list; against
# one value, a hedge).
_COUNTED = r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?[ \t]+[A-Za-z][a-z'\-]*(?:[ \t]+[a-z][a-z'\-]*)?"
_COUNTED_VALUES = re.compile(rf"(?P<x>{_COUNTED}(?:[ \t]*(?:,|,?[ \t]+and\b)[ \t]*{_COUNTED})+)[ \t]*[.!]?[ \t]*$")
# A number and its unit or noun ("19 widgets"), as a closing sentence's candidate.
_COUNT = re.compile(rf"{_COUNTED}$")
# "We get (p, q) = (3, 2).": a plain-text sentence whose last "=" gives the value.
_LAST_EQUALS = re.compile(r"=(?!>)\s*(?P<x>[^=]{1,60}?)\s*[.!]?\s*$")


def _concluding_value(paragraph: str) -> str | None:
    """The value the paragraph's last sentence ends by stating: "... the degree of \\((ax^6+...)\\) is 15.",
    "... is \\(n = 10\\).", "... = 3 + 4 = 7." (a number or a math span after "is"/"are"/"="/":", at most two
    words such as a unit after it)."""
    sentences = [x for x in SENTENCES.split(paragraph.strip()) if x.strip()]
    if not sentences:
        return None
    last = sentences[-1].strip()
    m = _NAMED_VALUES.search(last) or _COUNTED_VALUES.search(last)
    if m:
        return m.group("x").strip()
    m = _ENDS_WITH_NUMBER.search(last)
    if m and not any(w.lower() in _NOT_AFTER for w in m.group("rest").split()) and not _is_equation(last, m.start()):
        return m.group("x")
    stated = _stated_span(last)
    if stated is None and not math_spans(last):
        m = _LAST_EQUALS.search(last)
        if m and answer_like(m.group("x")) and not WORD.search(m.group("x")) and not _is_equation(last, m.start()):
            return m.group("x")
    return stated


_VARIABLE_SUM = re.compile(r"[A-Za-z]\s*[+\-]\s*\d*\.?\d*\s*[A-Za-z0-9]|[+\-]\s*\d*\.?\d*\s*[A-Za-z](?![A-Za-z])")


def _is_equation(sentence: str, at: int) -> bool:
    """Whether the "=" at ``at`` closes an equation in unknowns ("5x - 7y + 11z + 4 = 0"), whose right side is not
    the answer's value (as it is in "x = 5 + 5 + 1 = 11")."""
    if not sentence.startswith("=", at):
        return False
    left = sentence[:at].rsplit("=", 1)[-1]
    left = re.split(r"(?<=[a-z]{2})\s+(?=[A-Za-z0-9(\\])", left)[-1]  # from where the words stop
    return bool(_VARIABLE_SUM.search(left))


# Words after a stated number that make it something other than the answer ("is 5 more", "is 3 times").
_NOT_AFTER = frozenset({"more", "less", "fewer", "times", "greater", "smaller", "larger", "or", "and", "not", "than",
                        "of", "per", "plus", "minus"})


_CONCLUSION = re.compile(r"(?:^|[.!?:]\s+|\n)\s*(?:therefore|thus|hence|so|finally|in conclusion)\b[^.!?\n]*$",
                         re.IGNORECASE)


def _concluding_inline(paragraph: str, after: int) -> str | None:
    """Inline math after the last display, in a sentence that concludes ("Therefore, $\\cos A = -\\frac{24}{25}$."):
    the statement the display was working towards, so it wins over the display."""
    inlines = [m for m in inline_spans(paragraph) if m.start >= after]
    if not inlines or not after:
        return None
    m = inlines[-1]
    if not _CONCLUSION.search(paragraph[after:m.start]) or _NEGATED.match(paragraph, m.end):
        return None
    return m.body.strip()


# What follows a value to deny it ("so $x = 14$ and $y = 15$ is not a solution").
_NEGATED = re.compile(r"[^.!?\n]*?\b(?:is|are|was|were|does|do)\s*(?:not|n't)\b|[^.!?\n]*?\bfails?\b", re.IGNORECASE)


_LONE_SYMBOL = re.compile(r"[A-Za-z]|\\(?:alpha|beta|gamma|theta|lambda|mu|phi|varphi|omega|sigma|tau|rho)")


def _last_list(paragraph: str, spans: list[Span]) -> str:
    """The last inline span, with the spans before it that "and"/"or"/commas join to it ("$n = 5$ and $n = 15$")."""
    first = len(spans) - 1
    while first > 0 and _LIST_GLUE.fullmatch(paragraph[spans[first - 1].end:spans[first].start]):
        first -= 1
    return _joined(paragraph, spans, first)


def final_statements(text: str) -> list[str]:
    """The final answers a response commits to, each alternative separately ("4 or 5" is two), distinct by canonical
    spelling, in order: the shared reading of "the final answer" (the math verifier's extraction and the judges'
    hedging guard). Only committed statements count (boxes, ``####``, "the answer is", bold answers), read as
    ``extract`` reads them: reasoning after ``</think>``, this turn only, currency ``$`` as prose, retractions
    honoured. Linear in the text, so it may run on the event loop."""
    section = own_turn(escape_currency(turns.final_section(text)))
    seen: dict[str, str] = {}
    for st in committed_statements(section):
        for part in split_alternatives(st.text) or [st.text]:
            key = canonical(part)
            if key:
                seen.setdefault(key, part.strip())
    return list(seen.values())
