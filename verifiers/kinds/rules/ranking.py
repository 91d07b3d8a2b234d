"""``ranking``: a ranked list read from the answer, scored by NDCG@k, recall@k or MRR against graded relevance.

Lists are read as models write them: RankGPT's ``[2] > [3] > [1]``, a JSON list, numbered or bulleted lines, or items
separated by ``>`` or commas. An item named twice counts at its first place only (repeating a relevant item must not
add gain), and items outside the reference's candidates earn nothing.
"""
from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.rules.answer import answer_text, metric_verdict, structured_values
from verifiers.types import InvalidReference, Verdict

_BRACKET_IDS = re.compile(r"\[([^\[\]\n]{1,64})\]")
# [ \t], not \s: under MULTILINE a \s run spans blank lines and is retried from each one (quadratic).
_LINE_ITEM = re.compile(r"^[ \t]{0,16}(?:\d{1,6}[ \t]{0,4}[.):]|[-*•])[ \t]{0,16}(.+)$", re.MULTILINE)
MAX_ITEMS = 10_000


def _key(item: Any) -> str:
    return " ".join(str(item).strip().strip("\"'`*").casefold().split())


def read_ranking(text: str) -> list[str]:
    if ">" in text:
        ids = _BRACKET_IDS.findall(text)
        if len(ids) >= 2:
            return [_key(v) for v in ids[:MAX_ITEMS]]
        parts = [p for p in (_key(p) for p in text.split(">")) if p]
        if len(parts) >= 2:
            return parts[:MAX_ITEMS]
    for value in structured_values(text):
        if isinstance(value, list) and value and all(isinstance(v, (str, int, float)) for v in value):
            return [_key(v) for v in value[:MAX_ITEMS]]
    lines = _LINE_ITEM.findall(text)
    if len(lines) >= 2:
        return [_key(v) for v in lines[:MAX_ITEMS]]
    parts = [p for p in (_key(p) for p in re.split(r"[,\n]", text)) if p]
    return parts[:MAX_ITEMS]


def dcg(gains: list[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


class RankingOptions(BaseOptions):
    metric: Literal["ndcg", "recall", "mrr"] = Field("ndcg", description="NDCG@k, recall@k or MRR (first hit in k).")
    k: int | None = Field(None, ge=1, le=MAX_ITEMS, description="Cut-off (default: the reference's k, else 10).")
    gain: Literal["linear", "exponential"] = Field("linear", description="NDCG gain: the grade, or 2^grade - 1.")
    relevant_grade: float = Field(1.0, gt=0, description="Grade from which an item counts as relevant (recall, MRR).")


class RankingVerifier(Verifier[RankingOptions]):
    name = "ranking"
    description = "A ranked list read from the answer against graded relevance: NDCG@k, recall@k or MRR."
    Options = RankingOptions
    binary = False
    inline_max_chars = 20_000

    def check(self, response: str, reference: Any, options: RankingOptions) -> Verdict:
        relevance, ref_k = _reference(reference)
        k = options.k or ref_k or 10
        ranked = read_ranking(answer_text(response))
        if not ranked:
            return Verdict.no_answer("no ranked list found in the answer")
        seen: set[str] = set()
        unique: list[str] = []
        for item in ranked:
            if item not in seen:
                seen.add(item)
                unique.append(item)
        top = unique[:k]
        details: dict[str, Any] = {"metric": options.metric, "k": k, "ranked": top[:50],
                                   "duplicates": len(ranked) - len(unique),
                                   "unknown": [i for i in top if i not in relevance][:20]}
        if options.metric == "ndcg":
            def gain(g: float) -> float:
                return g if options.gain == "linear" else 2.0 ** g - 1.0

            ideal = dcg([gain(g) for g in sorted(relevance.values(), reverse=True)[:k]])
            value = dcg([gain(relevance.get(i, 0.0)) for i in top]) / ideal if ideal > 0 else 0.0
        else:
            relevant = {i for i, g in relevance.items() if g >= options.relevant_grade}
            if not relevant:
                raise InvalidReference(f"no reference item has a grade of at least {options.relevant_grade}")
            if options.metric == "recall":
                value = len(relevant & set(top)) / len(relevant)
            else:
                value = next((1.0 / (i + 1) for i, item in enumerate(top) if item in relevant), 0.0)
        details["value"] = value
        return metric_verdict(value, f"{options.metric}@{k}", None, **details)


def _reference(reference: Any) -> tuple[dict[str, float], int | None]:
    if not isinstance(reference, dict) or not isinstance(reference.get("relevance"), (dict, list)):
        raise InvalidReference('reference must be {"relevance": {"item": grade, ...}, "k": 10} '
                               '(or "relevance": [relevant items])')
    raw = reference["relevance"]
    if isinstance(raw, list):
        raw = {str(item): 1.0 for item in raw}
    relevance: dict[str, float] = {}
    for item, grade in raw.items():
        if isinstance(grade, bool) or not isinstance(grade, (int, float)) or grade < 0 or not math.isfinite(grade):
            raise InvalidReference(f"relevance grade of {item!r} must be a number >= 0")
        relevance[_key(item)] = float(grade)
    k = reference.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise InvalidReference("reference.k must be a positive integer")
    return relevance, k
