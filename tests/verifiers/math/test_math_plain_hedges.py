"""Hedges written in plain prose, without LaTeX or an answer marker: two different final values joined by hedging
words ("I think 6, maybe 4", "Probably 14 but 4 is also possible", "So 5? Or 4.") are rejected whichever value is
the gold and whichever comes last, after real GSM8K working (../shared/data). A single plain answer after the
working, and a self-correction that names a final answer ("6. Wait, it's 4"), are not hedges: the value named
last after the correction decides."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifiers.kinds.math.verifier import MathVerifier
from verifiers.types import Status

V = MathVerifier()
OPTS = V.parse_options({})

HEDGES = [
    "I think {a}, maybe {b}",
    "I think {a}, maybe {b}.",
    "Probably {a} but {b} is also possible",
    "So {a}? Or {b}.",
    "It's {a}. Or perhaps {b}.",
    "Maybe {a}, maybe {b}.",
    "Either {a} or possibly {b}.",
    "It could be {a}. Then again, {b} is possible too.",
    "{a} seems right, but it might be {b}.",
    "I'd say {a}... or {b}?",
    "The total is {a} - possibly {b} if we count differently.",
    "So it should be {a}, or maybe it's {b}",
    "Hmm, {a} perhaps. Or {b}.",
    "Not sure between {a} and {b}.",
    "Probably {a}, though {b} is also plausible.",
    "{a}? {b}?",
    "My guess is {a}, perhaps {b}.",
    "{a} or so, possibly {b}.",
]
NOT_HEDGES = [  # each gives {b} as its one final value
    "So she ends up with {b}.",
    "{b}",
    "I first thought {a}, but wait, it's {b}.",
    "That gives {a}. Wait, I forgot a step: it's {b}.",
    "Is it {a}? No, we must subtract first, so {b}.",
    "{a}? {b}? I'll go with {b}.",
    "There are probably quicker ways to see it, but the result is {b}.",
    "Actually, I made a mistake before; the total is {b}.",
]


def _solutions(shared_data: Path) -> list[tuple[str, str]]:
    path = shared_data / "math" / "gsm8k.test.jsonl"
    if not path.exists():
        pytest.skip("gsm8k.test.jsonl is absent")
    rows = [json.loads(line) for line in path.read_text().splitlines()[200:230]]
    out = []
    for row in rows:
        body, gold = (part.strip() for part in row["answer"].rsplit("####", 1))
        out.append((body, gold.replace(",", "")))
    return out


def _wrong(gold: str) -> str:
    return str(int(gold) + 3) if gold.lstrip("-").isdigit() else gold + "1"


def test_plain_hedges_are_rejected_in_both_orders(shared_data: Path) -> None:
    solutions = _solutions(shared_data)
    misses = []
    for i, template in enumerate(HEDGES):
        for body, gold in solutions[i % 10::10]:
            wrong = _wrong(gold)
            for a, b in ((gold, wrong), (wrong, gold)):
                response = f"{body}\n\n{template.format(a=a, b=b)}"
                verdict = V.check(response, gold, OPTS)
                if verdict.score != 0.0 or verdict.status is not Status.REJECTED:
                    misses.append((template, a, b, verdict.status, verdict.details.get("extracted")))
    assert not misses, misses


def test_the_quoted_hedges_without_working() -> None:
    for response, gold in [("I think 6, maybe 4", "4"), ("Probably 14 but 4 is also possible", "4"),
                           ("So 5? Or 4.", "4"), ("I think 6, maybe 4", "6"), ("So 5? Or 4.", "5")]:
        verdict = V.check(response, gold, OPTS)
        assert verdict.status is Status.REJECTED and verdict.details["method"] == "hedging", (response, verdict)


def test_one_plain_answer_or_a_correction_is_not_a_hedge(shared_data: Path) -> None:
    solutions = _solutions(shared_data)
    wrong_verdicts = []
    for template in NOT_HEDGES:
        for body, gold in solutions[:12]:
            wrong = _wrong(gold)
            for a, b, expected in ((wrong, gold, 1.0), (gold, wrong, 0.0)):
                response = f"{body}\n\n{template.format(a=a, b=b)}"
                verdict = V.check(response, gold, OPTS)
                if verdict.score != expected or verdict.details.get("method") == "hedging":
                    wrong_verdicts.append((template, a, b, expected, verdict.status, verdict.details.get("extracted")))
    assert not wrong_verdicts, wrong_verdicts


def test_working_with_hedging_words_but_one_final_value_is_not_a_hedge(shared_data: Path) -> None:
    for body, gold in _solutions(shared_data)[:10]:
        for ending in (f"Maybe there is a faster way, but each step above is needed. So {gold}.",
                       f"Could we have double counted? No, each item is counted once, so the total is {gold}."):
            verdict = V.check(f"{body}\n\n{ending}", gold, OPTS)
            assert verdict.score == 1.0, (ending, verdict)
