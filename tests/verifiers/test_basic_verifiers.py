"""The first verifiers, in-process: exact match normalisation, regex references, multiple-choice extraction."""
from __future__ import annotations

import pytest

from verifiers.kinds.basic import ExactMatchVerifier, MultipleChoiceVerifier, RegexMatchVerifier
from verifiers.types import InvalidReference

MC = MultipleChoiceVerifier()


@pytest.mark.parametrize("response, status, score", [
    ("The answer is (B).", "ok", 1.0),
    ("Reasoning... \\boxed{B}", "ok", 1.0),
    ("**B**", "ok", 1.0),
    ("so the correct option is C", "ok", 0.0),
    ("The answer is B, which is correct", "ok", 1.0),
    ("The answer is (B) and I am sure", "ok", 1.0),
    ("The answer is B, A is wrong", "ok", 1.0),
    ("I pick A. Final answer: B", "ok", 1.0),  # only one answer statement
    ("The answer is B or C.", "rejected", 0.0),
    ("The answer is D or B.", "rejected", 0.0),
    ("Answer: B and C", "rejected", 0.0),
    ("The answer is B/C", "rejected", 0.0),
    ("The answer is (B) or (C)", "rejected", 0.0),
    ("**B** or C", "rejected", 0.0),
    ("I have no idea", "no_answer", 0.0),
    ("\n" * 5000 + "B", "ok", 1.0),
])
def test_multiple_choice(response: str, status: str, score: float) -> None:
    v = MC.check(response, "B", MC.parse_options({}))
    assert (v.status.value, v.score) == (status, score), v.reason


def test_multiple_choice_reference_must_be_a_choice() -> None:
    with pytest.raises(InvalidReference):
        MC.check("B", "Z", MC.parse_options({"choices": "ABCD"}))


def test_exact_match_options() -> None:
    v = ExactMatchVerifier()
    assert v.check("PARIS!", "paris", v.parse_options({"ignore_punctuation": True})).score == 1.0
    assert v.check("PARIS", "paris", v.parse_options({"ignore_case": False})).score == 0.0
    assert v.check("b", ["a", "b"], v.parse_options({})).score == 1.0
    with pytest.raises(InvalidReference):
        v.check("x", {"a": 1}, v.parse_options({}))


def test_regex_modes() -> None:
    v = RegexMatchVerifier()
    assert v.check("abc123", r"\d+", v.parse_options({})).score == 1.0
    assert v.check("abc123", r"\d+", v.parse_options({"mode": "fullmatch"})).score == 0.0
    with pytest.raises(InvalidReference):
        v.check("x", "(", v.parse_options({}))
