"""Hedging in the math verifier: every shape of "several different final answers" is rejected with a reason,
whichever position the gold takes; one answer stated several ways, working that builds on a sub-result, and an
explicit self-correction are not hedging (the last committed answer decides)."""
from __future__ import annotations

import pytest

from verifiers.kinds.math.extract import committed_statements, stated_value
from verifiers.kinds.math.verifier import MathVerifier
from verifiers.types import Status, Verdict

V = MathVerifier()
OPTS = V.parse_options({})

# (template, gold, wrong): every template holds the gold and a wrong answer; both orders are tried.
HEDGES = [
    "Final answer: {a}\nFinal answer: {b}",
    "The answer is {a}.\nThe answer is {b}.",
    "Answer: {a}\n\nAnswer: {b}",
    "The final answer is {a}. The final answer is {b}.",
    "It could be {a}; it could also be {b}.",
    "The answer could be {a}. It could also be {b}.",
    "The answer is \\boxed{{{a}}}. It might also be {b}.",
    "The answer is either {a} or {b}.",
    "The answer is either {a} or {b}, depending on interpretation.",
    "{a} or {b}",
    "Either {a} or {b}.",
    "**{a}**\n\n**{b}**",
    "The answer is **{a}** or **{b}**.",
    "\\boxed{{{a}}}\n\nFinal answer: {b}",
    "The final answer is {a}.\n\n\\boxed{{{b}}}",
    "#### {a}\nThe answer is \\boxed{{{b}}}",
    "\\boxed{{{a}}} or \\boxed{{{b}}}",
    "Answer: {a}\nThe answer is also {b}.",
    "The answer is {a}. Actually, the answer is also {b}.",
    "The answer is {a}, or maybe {b}.",
    "Possibly {a}, possibly {b}.",
]
PAIRS = [("5", "7"), (r"\frac{11}{2}", r"\frac{13}{2}"), ("(8,-2)", "4210_{5}"), (r"\text{ellipse}", "-1")]


def check(response: str, reference: object) -> Verdict:
    return V.check(response, reference, OPTS)


@pytest.mark.parametrize("template", HEDGES)
@pytest.mark.parametrize("gold, wrong", PAIRS)
def test_hedges_are_rejected_in_both_orders(template: str, gold: str, wrong: str) -> None:
    for a, b in ((gold, wrong), (wrong, gold)):
        response = template.format(a=a, b=b)
        verdict = check(response, gold)
        assert verdict.score == 0.0, (response, verdict)
        assert verdict.status is Status.REJECTED, (response, verdict)
        assert verdict.details["method"] == "hedging" and verdict.reason, verdict


@pytest.mark.parametrize(
    "response",
    [
        "Final answer: 1/2\nFinal answer: 1/2",
        "The answer is 0.5.\nAnswer: \\frac{1}{2}",
        "\\boxed{\\frac12}\n\nThe final answer is 1/2.",
        "#### 0.5\nThe answer is \\boxed{1/2}",
        "Therefore the answer is $\\frac{1}{2}$. Final answer: \\boxed{0.5}",
        "Putting the final answer within \\boxed{}, we get: \\[\\boxed{\\frac{1}{2}}\\]",
        "We check our answer: 2 \\cdot \\frac{1}{2} = 1, so the answer is \\boxed{\\frac{1}{2}}.",
        "The answer is \\boxed{\\frac12}. I hope it is correct.",
        "Final Answer: The final answer is $\\frac{1}{2}$. I hope it is correct.",
    ],
)
def test_one_answer_stated_several_ways_is_not_hedging(response: str) -> None:
    verdict = check(response, r"\frac{1}{2}")
    assert verdict.status is Status.OK and verdict.score == 1.0, (response, verdict)


@pytest.mark.parametrize(
    "response",
    [
        # Sub-results stated along the way, then working that builds on them.
        "For two variables the answer is $1 + 2 = 3$. For three, 3 + 6 = 9, so the answer is $9$.",
        "The number of pairs is the answer: $P(6,2) = 30$. Then $30 \\cdot 3 = 90$ and the answer is \\boxed{9}.",
        "The same answer is \\(25 + 20 = 45\\) ways.\n\nTherefore the final answer is:\n\\[\\frac{45}{5} = 9\\]",
        # Candidates entertained during the reasoning, then one committed answer.
        "x could be 3 or 7. Since x > 8 is impossible and x is odd and 9 = 3 + 6, the answer is 9.",
        # Headings are not answers.
        "#### Step 1: Setup\nWe get 4 + 5 = 9.\n\n#### Step 2: Conclusion\n**Case 1: n even**\n\\boxed{9}",
    ],
)
def test_reasoning_that_reaches_one_answer_is_accepted(response: str) -> None:
    verdict = check(response, "9")
    assert verdict.status is Status.OK and verdict.score == 1.0, (response, verdict)


@pytest.mark.parametrize(
    "response, expected",
    [
        ("The answer is 5. Wait, that is wrong: 3 + 4 = 7. The answer is 7.", 1.0),
        ("\\boxed{5}\n\nActually, I made a mistake in step 2. Redoing it: \\boxed{7}", 1.0),
        ("Final answer: 7. Wait, let me recheck: 3 + 3 = 6. Final answer: 6.", 0.0),  # the correction decides
    ],
)
def test_an_explicit_self_correction_replaces_the_earlier_answer(response: str, expected: float) -> None:
    verdict = check(response, "7")
    assert verdict.status is Status.OK and verdict.score == expected, (response, verdict)


def test_a_correction_that_only_adds_a_candidate_is_still_hedging() -> None:
    for response in ("The answer is 5. Wait, it could also be 7.", "Answer: 5. Actually, the answer is also 7."):
        verdict = check(response, "7")
        assert verdict.status is Status.REJECTED, (response, verdict)


def test_one_wrong_answer_written_twice_is_wrong_not_hedged() -> None:
    verdict = check("\\boxed{3}\n\nFinal answer: 3.0", "4")
    assert verdict.status is Status.OK and verdict.score == 0.0 and verdict.details["method"] != "hedging"


def test_several_values_still_match_a_multi_valued_gold() -> None:
    assert check("The answers are $1$ and $-2$.", "1, -2").score == 1.0
    assert check("The roots are \\boxed{1} and \\boxed{-2}.\n\nFinal answer: 1, -2", "-2, 1").score == 1.0


def test_statements_and_stated_values() -> None:
    found = committed_statements("#### Step 1\nAnswer: 4\n**7**\n\\boxed{9}")
    assert [(s.method, s.text) for s in found] == [("answer_phrase", "4"), ("bold", "7"), ("boxed", "9")]
    assert stated_value("P(6,5) = \\frac{6!}{1!} = 720") == "720"
    assert stated_value("\\frac{45}{125} = \\frac{9}{25}") == "\\frac{9}{25}"
    assert stated_value("y = 2x + 1") == "y = 2x + 1"
    assert stated_value("x = 2 or x = 3") == "x = 2 or x = 3"
