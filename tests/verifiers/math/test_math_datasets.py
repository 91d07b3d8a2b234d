"""The math verifier on real data: MATH-500 golds against themselves, generated equivalent rewrites and other
problems' golds; GSM8K golds against the reference solutions; AIME24/AMC23 golds against integer answers.
Counts are printed (run with -s to see them)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.math_data import load, rewrites, same_value
from verifiers.kinds.math.verifier import MathVerifier
from verifiers.types import Status

V = MathVerifier()
OPTS = V.parse_options({})


def score(response: str, reference: object) -> float | None:
    return V.check(response, reference, OPTS).score


@pytest.fixture(scope="module")
def math500(shared_data: Path) -> list[dict]:
    return load(shared_data / "math" / "math500.test.jsonl")


def test_math500_gold_against_itself_and_its_solution(math500: list[dict]) -> None:
    boxed = sum(score(f"The answer is $\\boxed{{{r['answer']}}}$.", r["answer"]) == 1.0 for r in math500)
    solution = sum(score(r["solution"], r["answer"]) == 1.0 for r in math500)
    print(f"\nMATH-500: gold vs itself accepted {boxed}/{len(math500)}; vs its solution {solution}/{len(math500)}")
    assert boxed == len(math500)
    assert solution == len(math500)


def test_math500_equivalent_rewrites_are_accepted(math500: list[dict]) -> None:
    pairs = [(r["answer"], w) for r in math500 for w in rewrites(r["answer"])]
    failed = [(g, w) for g, w in pairs if score(f"\\boxed{{{w}}}", g) != 1.0]
    print(f"\nMATH-500 rewrites: {len(pairs) - len(failed)}/{len(pairs)} accepted over {len(math500)} golds")
    assert len(pairs) > 650
    assert not failed, failed[:20]


def test_math500_other_problems_golds_are_rejected(math500: list[dict]) -> None:
    pairs = []
    for shift in (1, 7, 101):
        for i, row in enumerate(math500):
            other = math500[(i + shift) % len(math500)]["answer"]
            if not same_value(row["answer"], other):
                pairs.append((row["answer"], other))
    accepted = [(g, o) for g, o in pairs if score(f"\\boxed{{{o}}}", g) == 1.0]
    print(f"\nMATH-500 cross-problem pairs: {len(pairs) - len(accepted)}/{len(pairs)} rejected")
    assert len(pairs) > 1400
    assert not accepted, accepted


def test_gsm8k_gold_against_reference_solution(shared_data: Path) -> None:
    rows = load(shared_data / "math" / "gsm8k.test.jsonl")
    golds = [r["answer"].rsplit("####", 1)[1].strip() for r in rows]
    with_hashes = sum(score(r["answer"], g) == 1.0 for r, g in zip(rows, golds))
    # The same solutions ending in prose instead of the "#### N" marker.
    prose = [re.sub(r"\n?####\s*(.+)$", r"\nThe answer is \1.", r["answer"]) for r in rows]
    with_prose = sum(score(p, g) == 1.0 for p, g in zip(prose, golds))
    wrong = sum(score(r["answer"], str(int(g.replace(",", "")) + 1)) == 1.0 for r, g in zip(rows, golds))
    print(f"\nGSM8K: #### solutions accepted {with_hashes}/{len(rows)}; prose endings {with_prose}/{len(rows)};"
          f" off-by-one golds accepted {wrong}")
    assert with_hashes == len(rows)
    assert with_prose == len(rows)
    assert wrong == 0


@pytest.mark.parametrize("name, key", [("aime24", "answer"), ("amc23", "answer")])
def test_competition_golds_against_integer_answers(shared_data: Path, name: str, key: str) -> None:
    rows = load(shared_data / "math" / f"{name}.test.jsonl")
    ok = 0
    for r in rows:
        gold = r[key]
        value = int(float(gold))
        for reference in (gold, str(gold)):
            verdict = V.check(f"Therefore the answer is $\\boxed{{{value}}}$.", reference, OPTS)
            assert verdict.status is Status.OK
            ok += verdict.score == 1.0
            assert score(f"\\boxed{{{value + 1}}}", reference) == 0.0
        assert score(f"The final answer is {value}", gold) == 1.0
    print(f"\n{name}: {ok}/{2 * len(rows)} integer answers accepted (gold as given and as text)")
    assert ok == 2 * len(rows)


def test_real_model_outputs_from_processbench(shared_data: Path, math500: list[dict]) -> None:
    """ProcessBench's Llama/Qwen solutions to MATH-500 and GSM8K problems, graded against the data set's gold: our
    verdicts agree with ProcessBench's human `final_answer_correct` label at least as often as math-verify's do."""
    from math_verify import parse, verify

    gsm8k = load(shared_data / "math" / "gsm8k.test.jsonl")
    golds = {
        "math": {r["problem"].strip(): r["answer"] for r in math500},
        "gsm8k": {r["question"].strip(): r["answer"].rsplit("####", 1)[1].strip() for r in gsm8k},
    }
    cases = []
    for name, gold in golds.items():
        for item in json.loads((shared_data / "prm" / f"processbench_{name}.json").read_text()):
            if item["problem"].strip() in gold:
                steps = item["steps"] if isinstance(item["steps"], list) else json.loads(item["steps"])
                label = str(item["final_answer_correct"]) == "True"
                cases.append(("\n\n".join(steps), gold[item["problem"].strip()], label))
    ours = sum((score(r, g) == 1.0) == label for r, g, label in cases)
    theirs = sum(bool(verify(parse(f"${g}$", parsing_timeout=None), parse(r, parsing_timeout=None),
                             timeout_seconds=None)) == label for r, g, label in cases)
    print(f"\nProcessBench on MATH-500/GSM8K problems: {len(cases)} model solutions; agreement with the human label: "
          f"ours {ours}, math-verify {theirs}")
    assert len(cases) >= 500
    assert ours >= theirs
