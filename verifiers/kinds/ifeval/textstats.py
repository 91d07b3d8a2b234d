"""Counting words, sentences and capitalised tokens, and detecting the language, the way IFEval's checker does.

The reference checker counts sentences with nltk's pre-trained Punkt model and capital words with nltk's
``word_tokenize``; both need tokenizer data that must not be downloaded at run time. So this module carries its own
Punkt-style splitter: the same candidate/annotation scheme (a sentence may end at ``.?!`` followed by space or
closing punctuation; a period after a known abbreviation, an initial, an ordinal or an ellipsis is a break only when
orthographic evidence says the next word starts a sentence). The orthographic evidence Punkt learns from a corpus is
learnt here from the document itself plus a short list of common English words, which is enough to agree with the
reference on IFEval (see tests/verifiers/ifeval/test_ifeval_reference.py).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import langdetect
from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

# --- words -----------------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def count_words(text: str) -> int:
    """IFEval's word count: runs of word characters (so "don't" is two words, "3.5" is two)."""
    return len(_WORD.findall(text))


# --- Punkt-style sentence splitting -------------------------------------------------------------------------------

_NON_WORD = r"""[?!)";}\]*:@'({\[]"""
_MULTI_CHAR = r"(?:-{2,}|\.{2,}|(?:\.\s){2,}\.)"
_WORD_START = r"""[^("`{\[:;&#*@)}\]\-,]"""
_TOKEN = re.compile(
    rf"{_MULTI_CHAR}"
    rf"|(?={_WORD_START})\S+?(?=\s|$|{_NON_WORD}|{_MULTI_CHAR}|,(?=$|\s|{_NON_WORD}|{_MULTI_CHAR}))"
    r"|\S"
)
# A possible sentence end: word material, an end character, then punctuation or whitespace and the next token.
_CANDIDATE = re.compile(rf"\S*[.?!](?=(?P<after>{_NON_WORD}|\s+(?P<next>\S+)))")
_NUMBER = re.compile(r"^-?[.,]?\d[\d,.-]*\.?$")
_INITIAL = re.compile(r"[^\W\d]\.$")
_ELLIPSIS = re.compile(r"\.\.+$")
_DOTTED_ACRONYM = re.compile(r"^(?:[^\W\d_]\.)+[^\W\d_]$")
_CLOSING = re.compile(r"""["')\]}]+?(?:\s+|(?=--)|$)""", re.MULTILINE)

# Abbreviations that do not end a sentence by themselves (lower case, without the final period).
ABBREVIATIONS = frozenset(
    """mr mrs ms messrs dr prof rev hon gen col lt sgt capt cmdr adm gov sen rep st mt ft jr sr vs etc e.g i.e cf al
    approx dept inc ltd corp bros vol vols fig figs ed eds jan feb apr jun jul aug sep sept oct nov dec
    a.m p.m u.s u.k u.s.a u.n d.c ph.d b.a m.a b.sc m.sc m.d ave blvd rd n.y l.a""".split()
)
# Words that, capitalised after a period, mark a new sentence (Punkt learns these; a short list stands in).
_COMMON_LOWER = frozenset(
    """a an the this that these those it its i we you he she they there here then so but and or if when while
    as at in on of for to from by with without after before during however also finally first second third next
    now today in this our my your his her their what why how who where which some many most all each every no not
    one two three let please thank thanks overall additionally furthermore moreover therefore thus yes instead
    remember note make use try take keep consider""".split()
)

_BEG_UC, _MID_UC, _UNK_UC, _BEG_LC, _MID_LC, _UNK_LC = (1 << i for i in range(1, 7))
_UC, _LC = _BEG_UC | _MID_UC | _UNK_UC, _BEG_LC | _MID_LC | _UNK_LC
_ORTHO_FLAGS = {("initial", True): _BEG_UC, ("internal", True): _MID_UC, ("unknown", True): _UNK_UC,
                ("initial", False): _BEG_LC, ("internal", False): _MID_LC, ("unknown", False): _UNK_LC}


@dataclass
class _Tok:
    text: str
    sentbreak: bool = False
    abbr: bool = False
    ellipsis: bool = False

    @property
    def type(self) -> str:
        return "##number##" if _NUMBER.match(self.text) else self.text.lower()

    @property
    def type_no_period(self) -> str:
        t = self.type
        return t[:-1] if len(t) > 1 and t.endswith(".") else t

    @property
    def period_final(self) -> bool:
        return self.text.endswith(".")

    @property
    def is_initial(self) -> bool:
        return bool(_INITIAL.match(self.text))

    @property
    def first_upper(self) -> bool:
        return self.text[:1].isupper()

    @property
    def first_lower(self) -> bool:
        return self.text[:1].islower()


def _annotate_first_pass(tok: _Tok) -> None:
    t = tok.text
    if t in (".", "?", "!"):
        tok.sentbreak = True
    elif _ELLIPSIS.match(t):
        tok.ellipsis = True
    elif tok.period_final and not t.endswith(".."):
        stem = t[:-1].lower()
        if stem in ABBREVIATIONS or stem.split("-")[-1] in ABBREVIATIONS or _DOTTED_ACRONYM.match(stem):
            tok.abbr = True
        else:
            tok.sentbreak = True


class _Orthography:
    """How each word type is cased at a sentence start, inside a sentence, or where that is unclear (after a
    number, an initial, an abbreviation or a line break) in this document: Punkt's orthographic context."""

    def __init__(self, text: str):
        self.flags: dict[str, int] = {}
        context = "internal"
        for _lineno, line in enumerate(text.split("\n")):
            if not line.strip():
                context = "initial" if context != "unknown" else context
                continue
            for i, raw in enumerate(_TOKEN.findall(line)):
                if i == 0 and context == "internal":
                    context = "unknown"  # a line break may or may not start a sentence
                tok = _Tok(raw)
                _annotate_first_pass(tok)
                if tok.first_upper or tok.first_lower:
                    key = tok.type_no_period if tok.sentbreak else tok.type
                    flag = _ORTHO_FLAGS[(context, tok.first_upper)]
                    self.flags[key] = self.flags.get(key, 0) | flag
                if tok.sentbreak:
                    context = "unknown" if (tok.type_no_period == "##number##" or tok.is_initial) else "initial"
                elif tok.ellipsis or tok.abbr:
                    context = "unknown"
                else:
                    context = "internal"

    def known(self, key: str) -> int:
        return self.flags.get(key, 0) | (_MID_LC if key in _COMMON_LOWER else 0)

    def starts_sentence(self, tok: _Tok) -> bool | None:
        """True / False when the evidence says so, None when it does not know (Punkt's orthographic heuristic)."""
        if tok.text in (";", ":", ",", ".", "!", "?"):
            return False
        flags = self.known(tok.type_no_period if tok.sentbreak else tok.type)
        if tok.first_upper and flags & _LC and not flags & _MID_UC:
            return True
        if tok.first_lower and (flags & _UC or not flags & _BEG_LC):
            return False
        return None


def _second_pass(tok: _Tok, nxt: _Tok, ortho: _Orthography) -> None:
    if not tok.period_final:
        return
    initial = tok.is_initial
    if (tok.abbr or tok.ellipsis) and not initial:
        if ortho.starts_sentence(nxt) is True:
            tok.sentbreak = True
            return
    if initial or tok.type_no_period == "##number##":
        verdict = ortho.starts_sentence(nxt)
        if verdict is False:
            tok.sentbreak, tok.abbr = False, True
        elif verdict is None and initial and nxt.first_upper:
            if not ortho.known(nxt.type_no_period if nxt.sentbreak else nxt.type) & _LC:
                tok.sentbreak, tok.abbr = False, True


def _breaks_here(context: str, ortho: _Orthography) -> bool:
    toks = [_Tok(t) for t in _TOKEN.findall(context)]
    for tok in toks:
        _annotate_first_pass(tok)
    for tok, nxt in zip(toks, toks[1:]):
        _second_pass(tok, nxt, ortho)
    return any(tok.sentbreak for tok in toks[:-1])


def split_sentences(text: str) -> list[str]:
    """Sentences as Punkt would cut them (closing quotes and brackets stay with the sentence they close)."""
    ortho = _Orthography(text)
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _CANDIDATE.finditer(text):
        if m.start() < start:
            continue
        if not _breaks_here(m.group() + m.group("after"), ortho):
            continue
        spans.append((start, m.end()))
        start = m.start("next") if m.group("next") else m.end()
    spans.append((start, len(text.rstrip())))
    sentences: list[str] = []
    shift = 0
    for (a, b), following in zip(spans, [*spans[1:], None]):
        a += shift
        shift = 0
        if following is not None:
            closing = _CLOSING.match(text[following[0]:following[1]])
            if closing:  # "Done." he said: the closing quote belongs to the sentence it closes
                sentences.append(text[a:following[0] + len(closing.group().rstrip())])
                shift = closing.end()
                continue
        if text[a:b]:
            sentences.append(text[a:b])
    return sentences


def count_sentences(text: str) -> int:
    return len(split_sentences(text))


# --- word tokens for capital-word counting -----------------------------------------------------------------------

_SPLIT_PUNCT = re.compile(r"""(\.{2,}|--|[«“‘„`»”’";@#$%&\u2012-\u2015?!*()\[\]{}<>]|[:,](?!\d))""")
_CONTRACTION = re.compile(r"^(.*[^'])('[sSmMdD]|'ll|'LL|'re|'RE|'ve|'VE|n't|N'T|')$")
_FUSED = re.compile(r"(?i)\b(can)(not)\b|\b(d)('ye)\b|\b(gim)(me)\b|\b(gon)(na)\b|\b(got)(ta)\b|\b(lem)(me)\b"
                    r"|\b(more)('n)\b|\b(wan)(na)$")


def _unfuse(m: re.Match[str]) -> str:
    return " ".join(g for g in m.groups() if g)


def word_tokens(text: str) -> list[str]:
    """Tokens as nltk's word_tokenize cuts them, as far as letters go: quotes, brackets, ``*``, ``;@#$%&?!``,
    dashes and ``:,`` before a non-digit are split off; then "cannot"-style fusions and contractions are split."""
    out: list[str] = []
    for chunk in text.split():
        for piece in _SPLIT_PUNCT.split(chunk):
            for part in _FUSED.sub(_unfuse, piece).split():
                m = _CONTRACTION.match(part)
                out.extend(m.groups() if m else (part,))
    return out


def count_capital_words(text: str) -> int:
    return sum(1 for tok in word_tokens(text) if tok.isupper())


# --- language -----------------------------------------------------------------------------------------------------


def load_language_profiles() -> None:
    """Load langdetect's profiles now (1-2 s), e.g. when a worker starts, instead of inside a check's deadline."""
    _detector_factory()


@functools.lru_cache(maxsize=1)
def _detector_factory() -> DetectorFactory:
    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    factory.seed = 0  # langdetect samples n-grams at random: a fixed seed makes verdicts reproducible
    return factory


def supported_languages() -> frozenset[str]:
    return frozenset(_detector_factory().get_lang_list())


def detect_language(text: str) -> str | None:
    """ISO 639-1 code of the text's language, or None when langdetect finds no features (no letters)."""
    detector = _detector_factory().create()
    detector.append(text)
    try:
        return str(detector.detect())
    except langdetect.LangDetectException:
        return None
