"""``text_similarity``: BLEU and chrF (sacrebleu), ROUGE (rouge-score) and embedding cosine against references.

The metrics are the libraries' own; this module reads the answer and guards the hacks open-ended similarity
rewards invite: an empty answer, degenerate repetition (a phrase repeated to collect n-gram matches), an answer far
longer than any reference (recall-oriented ROUGE rewards padding), and the prompt or source copied back (an
untranslated source scores well on chrF against many references).

Embeddings come from a local sentence-embedding model configured like the length verifier's tokenizers: a name
mapped to a directory (``embedding_models`` setting, or ``REWARD_SERVICE_EMBEDDING_MODELS`` as JSON outside the
server), loaded once per worker; the vector is the attention-masked mean of the last hidden states, and the score
is the cosine clipped to [0, 1].
"""
from __future__ import annotations

import json
import os
from collections import Counter
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.context import process_setting
from verifiers.kinds.rules.answer import answer_text, metric_verdict
from verifiers.types import InvalidReference, Verdict, VerifierUnavailable

Metric = Literal["bleu", "chrf", "rouge_l", "rouge1", "rouge2", "rouge_lsum", "embedding"]
_ROUGE_TYPES = {"rouge_l": "rougeL", "rouge1": "rouge1", "rouge2": "rouge2", "rouge_lsum": "rougeLsum"}


class SimilarityOptions(BaseOptions):
    metric: Metric = Field("chrf", description="bleu, chrf, rouge_l / rouge1 / rouge2 / rouge_lsum, or embedding.")
    tokenize: Literal["13a", "intl", "zh", "char", "none", "ja-mecab", "ko-mecab", "flores101", "flores200"] = Field(
        "13a", description="sacrebleu's tokenizer for BLEU (mecab and flores ones need their extra packages).")
    lowercase: bool = Field(False, description="BLEU: compare lower-cased.")
    chrf_word_order: int = Field(0, ge=0, le=2, description="chrF word n-gram order (2: chrF++).")
    rouge_stemmer: bool = Field(True, description="ROUGE: Porter-stem English tokens (rouge-score's use_stemmer).")
    model: str | None = Field(None, description="Configured embedding model name (metric embedding).")
    max_length_ratio: float = Field(4.0, gt=1, description="Refuse answers longer than this many times the longest "
                                    "reference (in words).")
    max_repetition: float = Field(0.5, gt=0, le=1, description="Refuse answers whose share of repeated word "
                                  "3-grams exceeds this (and the references' own share by 0.2).")
    copy_threshold: float = Field(0.9, gt=0, le=1, description="Refuse answers whose word 4-grams are at least this "
                                  "share copied from the source while covering half of it.")
    threshold: float | None = Field(None, ge=0, le=1, description="Score 1 when the metric reaches it, else 0.")


def repetition(words: list[str], n: int = 3) -> float:
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    if len(grams) < 8:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def _grams(words: list[str], n: int = 4) -> Counter[tuple[str, ...]]:
    return Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


def copied_share(answer: list[str], source: list[str]) -> tuple[float, float]:
    """(share of the answer's 4-grams found in the source, share of the source's 4-grams the answer covers)."""
    got, src = _grams(answer), _grams(source)
    if not got or not src:
        return 0.0, 0.0
    common = sum((got & src).values())
    return common / sum(got.values()), common / sum(src.values())


def _reference(reference: Any) -> tuple[list[str], str | None]:
    source = None
    if isinstance(reference, dict):
        source = reference.get("source")
        if source is not None and not isinstance(source, str):
            raise InvalidReference("reference.source must be a string")
        reference = reference.get("references", reference.get("reference"))
    refs = [reference] if isinstance(reference, str) else reference
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) and r.strip() for r in refs):
        raise InvalidReference('reference must be a string, a list of strings, or {"references": [...], '
                               '"source": "..."}')
    return refs, source


def lexical(metric: str, hypothesis: str, refs: list[str], options: SimilarityOptions) -> float:
    if metric == "bleu":
        return float(_bleu(options.tokenize, options.lowercase).sentence_score(hypothesis, refs).score) / 100.0
    if metric == "chrf":
        return float(_chrf(options.chrf_word_order).sentence_score(hypothesis, refs).score) / 100.0
    kind = _ROUGE_TYPES[metric]
    scorer = _rouge(kind, options.rouge_stemmer)
    return max(float(scorer.score(r, hypothesis)[kind].fmeasure) for r in refs)


def _sacrebleu() -> Any:
    try:
        import sacrebleu
    except ImportError:
        raise VerifierUnavailable("BLEU and chrF need sacrebleu (pip install reward-service[rules])") from None
    return sacrebleu


# sacrebleu's sentence_bleu / sentence_chrf build a metric (and its tokenizer) per call; a kept metric object scores
# the same sentences with the same settings several times faster.
@lru_cache(maxsize=16)
def _bleu(tokenize: str, lowercase: bool) -> Any:
    try:
        return _sacrebleu().metrics.BLEU(tokenize=tokenize, lowercase=lowercase, effective_order=True)
    except (ImportError, ValueError, KeyError, AssertionError) as exc:
        raise VerifierUnavailable(f"sacrebleu cannot use tokenize={tokenize!r} here: {exc}") from None


@lru_cache(maxsize=4)
def _chrf(word_order: int) -> Any:
    return _sacrebleu().metrics.CHRF(word_order=word_order)


@lru_cache(maxsize=8)
def _rouge(kind: str, stemmer: bool) -> Any:
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        raise VerifierUnavailable("ROUGE needs rouge-score (pip install reward-service[rules])") from None

    return rouge_scorer.RougeScorer([kind], use_stemmer=stemmer)


def configured_models() -> dict[str, str]:
    configured = process_setting("embedding_models")
    if configured:
        return dict(configured)
    raw = os.environ.get("REWARD_SERVICE_EMBEDDING_MODELS", "")
    return json.loads(raw) if raw else {}


@lru_cache(maxsize=4)
def _load_embedder(path: str) -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    return tokenizer, model


def embed(name: str | None, texts: list[str]) -> list[list[float]]:
    models = configured_models()
    if not models:
        raise VerifierUnavailable("no embedding model is configured on this server (setting embedding_models)")
    if name is None:
        if len(models) != 1:
            raise InvalidReference(f"option model must name one of the embedding models: {sorted(models)}")
        name = next(iter(models))
    if name not in models:
        raise InvalidReference(f"embedding model {name!r} is not configured (known: {sorted(models)})")
    import torch

    tokenizer, model = _load_embedder(models[name])
    limit = int(getattr(model.config, "max_position_embeddings", 512) or 512)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=limit, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
    return [[float(v) for v in row] for row in torch.nn.functional.normalize(pooled, dim=-1)]


class TextSimilarityVerifier(Verifier[SimilarityOptions]):
    name = "text_similarity"
    description = ("Similarity to reference texts in [0, 1]: BLEU, chrF (sacrebleu), ROUGE (rouge-score) or a local "
                   "embedding model's cosine, with guards against empty, repeated, padded and copied answers.")
    Options = SimilarityOptions
    binary = False

    def warm_up(self) -> None:
        """Import the metrics' libraries (rouge-score pulls in nltk: seconds) and load the configured embedding models
        in each worker at start: a first check that paid for them would outlast the pool's slow-check limit and have
        its worker set aside, and the replacement would pay again."""
        try:
            _rouge("rougeL", True)
            _bleu("13a", False)
        except VerifierUnavailable:
            pass
        for name in configured_models():
            embed(name, ["warm up"])

    def check(self, response: str, reference: Any, options: SimilarityOptions) -> Verdict:
        refs, source = _reference(reference)
        text = answer_text(response)
        words = text.split()
        if not words:
            return Verdict.no_answer("empty answer")
        longest = max(len(r.split()) for r in refs)
        if len(words) > options.max_length_ratio * max(longest, 5):
            return Verdict.rejected(f"the answer has {len(words)} words, over {options.max_length_ratio:g}x the "
                                    f"longest reference ({longest})", words=len(words))
        rep = repetition(words)
        if rep > options.max_repetition and rep > max(repetition(r.split()) for r in refs) + 0.2:
            return Verdict.rejected(f"degenerate repetition: {rep:.0%} of the word 3-grams repeat", repetition=rep)
        if source is not None:
            share, coverage = copied_share(words, source.split())
            if share >= options.copy_threshold and coverage >= 0.5:
                return Verdict.rejected("the answer copies the source", copied=share, coverage=coverage)
        if options.metric == "embedding":
            vectors = embed(options.model, [text, *refs])
            value = max(sum(a * b for a, b in zip(vectors[0], v)) for v in vectors[1:])
        else:
            value = lexical(options.metric, text, refs, options)
        return metric_verdict(value, options.metric, options.threshold, metric=options.metric, value=value)
