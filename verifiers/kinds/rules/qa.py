"""``qa``: short answers (search-augmented QA, reading comprehension) by SQuAD's exact match and token F1.

The normalisation is SQuAD v1.1's evaluation script's (lower case, no punctuation, no articles a/an/the, single
spaces); the score is the best over the acceptable answers. The guard stops the hack token F1 invites: an answer
that lists several candidates ("Paris, Lyon, Marseille or Nice") to collect the overlap of whichever is right.
"""
from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, Literal

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.rules.answer import answer_text, metric_verdict
from verifiers.types import InvalidReference, Verdict

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_LEAD = re.compile(r"^(?:(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)\s*)", re.IGNORECASE)
# Separators of a candidate list: a comma or semicolon not inside a number, " or ", a slash, a new line or a bullet.
_LIST_SPLIT = re.compile(r"(?<!\d),|,(?!\d)|;|\bor\b|/|\n\s*(?:[-*•]|\d+[.)])?\s*", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1: lower case, drop punctuation and articles, collapse white space."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def candidates(text: str) -> list[str]:
    return [c for c in (normalize_answer(part) for part in _LIST_SPLIT.split(text)) if c]


class QAOptions(BaseOptions):
    metric: Literal["em", "f1"] = Field("f1", description="em: SQuAD exact match; f1: SQuAD token F1.")
    threshold: float | None = Field(None, ge=0, le=1, description="Score 1 when the metric reaches it, else 0.")
    max_candidates: int | None = Field(None, ge=1, le=100, description="Most distinct items an answer may list "
                                       "(default: as many as the longest acceptable answer has).")


class QAVerifier(Verifier[QAOptions]):
    name = "qa"
    description = "Short answer against acceptable answers: SQuAD exact match or token F1, candidate lists refused."
    Options = QAOptions
    binary = False
    inline_max_chars = 20_000

    def check(self, response: str, reference: Any, options: QAOptions) -> Verdict:
        golds = _golds(reference)
        text = answer_text(response)
        boxed = _BOXED.findall(text)
        if boxed:
            text = boxed[-1]
        text = _LEAD.sub("", text.strip()).strip()
        if not normalize_answer(text):
            return Verdict.no_answer("empty answer")
        limit = options.max_candidates or max(len(candidates(g)) for g in golds)
        listed = list(dict.fromkeys(candidates(text)))
        if len(listed) > limit:
            return Verdict.rejected(f"the answer lists {len(listed)} candidates", candidates=listed[:20])
        fn = exact_match if options.metric == "em" else token_f1
        scores = [fn(text, g) for g in golds]
        best = max(range(len(golds)), key=lambda i: scores[i])
        value = scores[best]
        return metric_verdict(value, options.metric, options.threshold, metric=options.metric, answer=text[:500],
                              matched=golds[best], value=value)


def _golds(reference: Any) -> list[str]:
    if isinstance(reference, dict):
        reference = reference.get("answers", reference.get("answer"))
    if isinstance(reference, (str, int, float)) and not isinstance(reference, bool):
        reference = [reference]
    if not isinstance(reference, list) or not reference:
        raise InvalidReference("reference must be an answer or a non-empty list of acceptable answers")
    golds = [str(g) for g in reference if isinstance(g, (str, int, float)) and not isinstance(g, bool)]
    if len(golds) != len(reference) or not any(normalize_answer(g) for g in golds):
        raise InvalidReference("acceptable answers must be non-empty strings or numbers")
    return golds
