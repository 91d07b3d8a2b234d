"""qa, text_similarity and ranking against their definitions: SQuAD's token F1, sacrebleu, rouge-score, NDCG."""
from __future__ import annotations

import math
import random
import re
import string

import pytest

from verifiers.kinds.rules.qa import QAVerifier
from verifiers.kinds.rules.ranking import RankingVerifier
from verifiers.kinds.rules.similarity import TextSimilarityVerifier

sacrebleu = pytest.importorskip("sacrebleu")
rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")

QA, SIM, RANK = QAVerifier(), TextSimilarityVerifier(), RankingVerifier()
WORDS = ("the cat dog sat on a mat in house river bank of money an old new red blue green man woman child "
         "paris london 1990 1,000 runs quickly slowly and with from").split()


def _norm(s: str) -> list[str]:
    """SQuAD v1.1's normalisation, written out independently: lower, strip punctuation, drop articles, split."""
    s = "".join(c for c in s.lower() if c not in set(string.punctuation))
    return re.sub(r"\b(a|an|the)\b", " ", s).split()


def _squad_f1(prediction: str, gold: str) -> float:
    p, g = _norm(prediction), _norm(gold)
    same = sum(min(p.count(w), g.count(w)) for w in set(p))
    if same == 0:
        return 0.0
    return 2 * (same / len(p)) * (same / len(g)) / ((same / len(p)) + (same / len(g)))


def _sentence(rng: random.Random, lo: int = 1, hi: int = 8) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def test_token_f1_equals_squads_definition_on_1000_cases() -> None:
    rng = random.Random(3)
    checked = 0
    for _ in range(1000):
        golds = [_sentence(rng, 1, 4) for _ in range(rng.randint(1, 3))]
        pred = _sentence(rng, 1, 4)
        if not any(_squad_f1(g, g) for g in golds):  # a gold of articles only is no answer
            continue
        v = QA.check(f"<answer>{pred}</answer>", golds, QA.Options(max_candidates=100))
        if v.status.value == "no_answer":
            continue
        assert v.score == pytest.approx(max(_squad_f1(pred, g) for g in golds)), (pred, golds)
        em = QA.check(pred, golds, QA.Options(metric="em", max_candidates=100))
        assert em.score == max(float(_norm(pred) == _norm(g)) for g in golds)
        checked += 1
    assert checked > 900


@pytest.mark.parametrize("response, golds, status, score", [
    ("<think>Searching...</think><answer>The Eiffel Tower</answer>", ["Eiffel Tower"], "ok", 1.0),
    ("<answer>Barack Obama</answer>", ["Obama", "Barack Obama"], "ok", 1.0),
    ("The final answer is: 1,000 people", ["1000 people"], "ok", 1.0),
    ("\\boxed{Washington, D.C.}", ["Washington, D.C."], "ok", 1.0),
    ("<answer>Paris, Lyon, Marseille or Nice</answer>", ["Paris"], "rejected", 0.0),  # padding with candidates
    ("<answer>Paris or Lyon</answer>", ["Paris"], "rejected", 0.0),
    ("<answer>- Paris\n- Lyon\n- Nice</answer>", ["Paris"], "rejected", 0.0),
    ("<answer>salt and pepper</answer>", ["salt and pepper"], "ok", 1.0),
    ("<answer></answer>", ["Paris"], "no_answer", 0.0),
    ("<answer>the</answer>", ["Paris"], "no_answer", 0.0),
])
def test_qa_reads_answers_and_refuses_candidate_lists(response: str, golds: list[str], status: str,
                                                      score: float) -> None:
    v = QA.check(response, golds, QA.Options())
    assert (v.status.value, v.score) == (status, score), v


def test_bleu_and_chrf_equal_sacrebleu_on_1000_cases() -> None:
    rng = random.Random(5)
    for i in range(1000):
        refs = [_sentence(rng, 3, 12) for _ in range(rng.randint(1, 3))]
        hyp = _sentence(rng, 3, 12)
        bleu = SIM.check(hyp, refs, SIM.Options(metric="bleu", max_repetition=1.0))
        chrf = SIM.check(hyp, refs, SIM.Options(metric="chrf", chrf_word_order=i % 3, max_repetition=1.0))
        assert bleu.score == pytest.approx(sacrebleu.sentence_bleu(hyp, refs).score / 100)
        assert chrf.score == pytest.approx(sacrebleu.sentence_chrf(hyp, refs, word_order=i % 3).score / 100)
        if len(refs) == 1:  # one segment: chrF's corpus score is the segment's (BLEU's differs: effective order)
            assert chrf.score == pytest.approx(sacrebleu.corpus_chrf([hyp], [[refs[0]]], word_order=i % 3).score
                                               / 100)


def test_rouge_equals_rouge_score_on_1000_cases() -> None:
    rng = random.Random(9)
    kinds = {"rouge_l": "rougeL", "rouge1": "rouge1", "rouge2": "rouge2", "rouge_lsum": "rougeLsum"}
    scorers = {k: rouge_scorer.RougeScorer([v], use_stemmer=True) for k, v in kinds.items()}
    for i in range(1000):
        metric = list(kinds)[i % 4]
        refs = [_sentence(rng, 3, 12) for _ in range(rng.randint(1, 2))]
        hyp = _sentence(rng, 3, 12)
        v = SIM.check(hyp, refs, SIM.Options(metric=metric, max_repetition=1.0))
        want = max(scorers[metric].score(r, hyp)[kinds[metric]].fmeasure for r in refs)
        assert v.score == pytest.approx(want)


@pytest.mark.parametrize("response, reason", [
    ("the cat the cat the cat the cat the cat the cat the cat the cat the cat the cat", "repetition"),
    (" ".join(["a long padded answer"] * 3 + WORDS * 2), "words, over"),
    ("Der Hund spielt heute im grossen Garten mit dem roten Ball", "copies the source"),
])
def test_similarity_guards(response: str, reason: str) -> None:
    ref = {"references": ["The dog plays in the big garden with the red ball today"],
           "source": "Der Hund spielt heute im grossen Garten mit dem roten Ball"}
    v = SIM.check(response, ref, SIM.Options(metric="chrf"))
    assert v.status.value == "rejected" and reason in v.reason, v


def test_an_extractive_summary_is_not_a_copy() -> None:
    source = " ".join(f"Sentence number {i} tells one more fact about the river bank and its money." for i in range(30))
    summary = "Sentence number 3 tells one more fact about the river bank and its money."
    v = SIM.check(summary, {"references": [summary], "source": source}, SIM.Options(metric="rouge_l"))
    assert v.status.value == "ok" and v.score == pytest.approx(1.0)


def test_empty_answer_is_no_answer() -> None:
    assert SIM.check("<think>hmm</think>", ["a reference"], SIM.Options()).status.value == "no_answer"


def _ndcg(ranked: list[str], rel: dict[str, float], k: int) -> float:
    gains = [rel.get(x, 0.0) for x in ranked[:k]]
    ideal = sorted(rel.values(), reverse=True)[:k]
    def d(g: list[float]) -> float:
        return sum(v / math.log2(i + 2) for i, v in enumerate(g))
    return d(gains) / d(ideal) if d(ideal) else 0.0


def test_ndcg_recall_mrr_on_1000_rankings() -> None:
    rng = random.Random(13)
    for _ in range(1000):
        items = [f"doc{i}" for i in range(rng.randint(3, 15))]
        rel = {x: float(rng.choice([0, 0, 1, 2, 3])) for x in items}
        if not any(rel.values()):
            rel[items[0]] = 1.0
        ranked = rng.sample(items, len(items))
        k = rng.randint(1, 10)
        style = rng.randrange(3)
        text = (" > ".join(f"[{x}]" for x in ranked) if style == 0 else str(ranked) if style == 1
                else "\n".join(f"{i + 1}. {x}" for i, x in enumerate(ranked)))
        ref = {"relevance": rel, "k": k}
        assert RANK.check(text, ref, RANK.Options()).score == pytest.approx(_ndcg(ranked, rel, k))
        relevant = {x for x, g in rel.items() if g >= 1}
        recall = RANK.check(text, ref, RANK.Options(metric="recall")).score
        assert recall == pytest.approx(len(relevant & set(ranked[:k])) / len(relevant))
        mrr = RANK.check(text, ref, RANK.Options(metric="mrr")).score
        assert mrr == pytest.approx(next((1 / (i + 1) for i, x in enumerate(ranked[:k]) if x in relevant), 0.0))


def test_a_repeated_relevant_item_earns_nothing_more() -> None:
    ref = {"relevance": {"a": 3, "b": 1, "c": 1}, "k": 3}
    once = RANK.check("[a] > [b] > [c]", ref, RANK.Options()).score
    thrice = RANK.check("[a] > [a] > [a]", ref, RANK.Options())
    assert thrice.score is not None and once is not None and thrice.score < once
    assert thrice.details["duplicates"] == 2
