"""The ``consensus`` verifier through the library engine: clustering, abstention, weights, semi-supervised groups,
and real ProcessBench groups (skipped without shared data)."""
from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.consensus import _processbench_groups
from verifiers import Engine, VerifyItem, build_registry
from verifiers.types import Verdict

ENGINE = Engine(build_registry())


def run(items: list[VerifyItem]) -> list[Verdict]:
    return asyncio.run(ENGINE.verify_many(items))


def group(responses: list[str], gid: str = "g", **options: Any) -> list[VerifyItem]:
    return [VerifyItem("consensus", r, None, dict(options), group=gid) for r in responses]


def test_equivalent_spellings_vote_together() -> None:
    verdicts = run(group([
        "So the probability is $\\boxed{\\frac{1}{2}}$.",
        "The answer is 0.5",
        "Therefore the final answer is $\\dfrac12$.",
        "We get $x = \\frac{2}{4}$.\n\nThe answer is $\\boxed{x = \\frac{2}{4}}$",
        "The answer is \\boxed{1/3}",
        "The answer is \\boxed{3}",
    ]))
    assert [v.score for v in verdicts] == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    d = verdicts[0].details
    assert d["clusters"] == 3 and d["votes"] == 6 and d["share"] == pytest.approx(4 / 6, abs=1e-6)
    assert d["pseudo_label"] == "\\frac{1}{2}" and d["reward_source"] == "consensus"
    assert d["entropy"] > 0 and verdicts[4].details["answer"] == "1/3"


@pytest.mark.parametrize("responses", [
    pytest.param(["The answer is $\\boxed{\\frac{\\sqrt{2}}{2}}$", "The answer is $\\boxed{\\frac{1}{\\sqrt{2}}}$",
                  "Final answer: $\\boxed{\\sqrt{\\tfrac12}}$", "The answer is $\\boxed{\\sqrt{2}}$"], id="symbolic"),
    # Several committed answers are one set answer when the majority states that set: not a hedge.
    pytest.param(["The solutions are $\\boxed{1}$ and $\\boxed{3}$.", "So $x=\\boxed{3}$ or $x=\\boxed{1}$.",
                  "The roots are \\boxed{1} and \\boxed{3}", "The answer is \\boxed{3}"], id="set-majority"),
])
def test_equivalent_answers_merge_across_buckets(responses: list[str]) -> None:
    verdicts = run(group(responses))
    assert [v.score for v in verdicts] == [1.0, 1.0, 1.0, 0.0]
    assert verdicts[0].details["clusters"] == 2


def test_tie_abstains() -> None:
    verdicts = run(group(["The answer is 4.", "The answer is \\boxed{4}", "The answer is 5.", "**5**"]))
    assert {v.status.value for v in verdicts} == {"no_consensus"}
    assert all(v.score is None for v in verdicts)
    assert "tie" in verdicts[0].reason and verdicts[0].details["pseudo_label"] is None


def test_weak_plurality_abstains_and_threshold_is_an_option() -> None:
    responses = ["The answer is 4."] * 3 + ["The answer is 5."] * 2 + ["The answer is 6."] * 2
    plurality = run(group(responses))
    assert {v.status.value for v in plurality} == {"no_consensus"} and plurality[0].details["share"] < 0.5
    majority = ["The answer is 4."] * 4 + ["The answer is 5."] * 3
    assert [v.score for v in run(group(majority))] == [1.0] * 4 + [0.0] * 3
    strict = run(group(majority, threshold=0.6))
    assert {v.status.value for v in strict} == {"no_consensus"}


def test_threshold_zero_is_plurality_voting_and_a_tie_abstains() -> None:
    """TTRL's rule: the most frequent answer wins (here 3 of 7, spelled three ways), a tie at the top abstains,
    and with ``min_size: 1`` a lone readable answer is its own plurality."""
    responses = ["The answer is 4.", "\\boxed{4}", "Final Answer: The final answer is $4.0$.", "The answer is 5.",
                 "**5**", "The answer is 6.", "It is 7"]
    plural = run(group(responses, threshold=0, min_size=1))
    assert [v.score for v in plural] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert plural[0].details["share"] == pytest.approx(3 / 7, abs=1e-6) and plural[0].details["pseudo_label"] == "4"
    assert {v.status.value for v in run(group(responses))} == {"no_consensus"}  # the default still wants a majority
    tie = run(group(["The answer is 4.", "\\boxed{4}", "The answer is 5.", "**5**", "It is 6"], threshold=0,
                    min_size=1))
    assert {v.status.value for v in tie} == {"no_consensus"} and "tie" in tie[0].reason
    alone = run(group(["Final Answer: The largest $n$ is 34.<|im_end|>", "I could not solve it."], threshold=0,
                      min_size=1))
    assert [(v.status.value, v.score) for v in alone] == [("ok", 1.0), ("no_answer", 0.0)]
    # "It is 4 or 5" offers candidates: refused, never a vote. The same committed hedge written twice is a set vote,
    # and a set wins only with a majority: as a plurality beside single answers from it, it elects nothing.
    hedged = run(group(["The answer is 4.", "The answer is 4 or 5.", "The answer is 4 or 5.", "The answer is 5.",
                        "It is 4 or 5"], threshold=0, min_size=1))
    assert [(v.status.value, v.score) for v in hedged][-1] == ("rejected", 0.0)
    assert {v.status.value for v in hedged[:4]} == {"no_consensus"} and "set" in hedged[0].reason


def test_a_threshold_between_zero_and_a_half_also_needs_a_clear_top() -> None:
    responses = ["The answer is 4."] * 3 + ["The answer is 5."] * 2 + ["The answer is 6."] * 2
    assert [v.score for v in run(group(responses, threshold=0.4))] == [1.0] * 3 + [0.0] * 4
    assert {v.status.value for v in run(group(responses, threshold=0.45))} == {"no_consensus"}


def test_group_below_min_size_is_not_scored_and_says_so() -> None:
    pair = run(group(["The answer is 7.", "The answer is \\boxed{7}"]))
    assert {v.status.value for v in pair} == {"group_too_small"} and all(v.score is None for v in pair)
    assert "min_size=3" in pair[0].reason
    assert [v.score for v in run(group(["The answer is 7.", "The answer is \\boxed{7}"], min_size=2))] == [1.0, 1.0]
    alone = run([VerifyItem("consensus", "The answer is 7.")])
    assert alone[0].status.value == "group_too_small" and alone[0].score is None
    # Unreadable responses do not count towards the size: two votes among four responses.
    few = run(group(["The answer is 7.", "The answer is 7.", "I don't know.", "It could be 7. It could also be 8."]))
    assert [v.status.value for v in few] == ["group_too_small", "group_too_small", "no_answer", "rejected"]


def test_hedged_and_unreadable_never_vote_and_never_score_one() -> None:
    verdicts = run(group([
        "The answer is 12.", "The answer is 12.", "The answer is 12.",
        "The answer is 12 or 13.",
        "It could be 12. It could also be 13.",
        "Answer: Thought process:",
    ]))
    assert [v.score for v in verdicts] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert [v.status.value for v in verdicts[3:]] == ["rejected", "rejected", "rejected"]
    assert verdicts[0].details["votes"] == 4  # the set {12, 13} voted as itself, the tentative one and ":" did not


def test_weighted_votes_change_the_outcome() -> None:
    responses = ["The answer is 4."] * 3 + ["The answer is 5."] * 2
    assert [v.score for v in run(group(responses))] == [1.0] * 3 + [0.0] * 2
    weighted = [VerifyItem("consensus", r, None, {"weight": 1.0 if "4" in r else 3.0}, group="w") for r in responses]
    verdicts = run(weighted)
    assert [v.score for v in verdicts] == [0.0] * 3 + [1.0] * 2
    assert verdicts[0].details["weighted"] and verdicts[3].details["weight"] == 3.0
    assert verdicts[0].details["share"] == pytest.approx(6 / 9, abs=1e-6)


def test_weight_by_a_verifier_score() -> None:
    responses = ["The answer is 4."] * 3 + ["I double-checked it. The answer is 5."] * 2
    by = {"weight_by": {"verifier": "regex", "reference": "double-checked"}}
    verdicts = run(group(responses, **by))
    assert [v.score for v in verdicts] == [0.0] * 3 + [1.0] * 2
    assert [v.details["weight"] for v in verdicts] == [0.0] * 3 + [1.0] * 2


def test_unknown_weight_verifier_is_refused_and_missing_weight_is_not_a_zero() -> None:
    with pytest.raises(KeyError):
        ENGINE.prepare(VerifyItem("consensus", "4", None, {"weight_by": {"verifier": "nope"}}, group="x"))
    # A weight that cannot be computed (the regex reference is invalid) leaves the group unscored, never 0.
    verdicts = run(group(["The answer is 4."] * 3, weight_by={"verifier": "regex", "reference": "("}))
    assert {v.status.value for v in verdicts} == {"invalid_reference"} and all(v.score is None for v in verdicts)


def test_semi_supervised_batch_mixes_both_kinds() -> None:
    labelled = [VerifyItem("consensus", r, "\\frac{1}{2}", {}, group="lab") for r in
                ["The answer is 0.5", "The answer is 2", "The answer is 2", "The answer is 2"]]
    unlabelled = group(["The answer is 9.", "The answer is \\boxed{9}", "So 9.0 is the answer", "The answer is 8"],
                       gid="free")
    mixed = run(labelled[:2] + unlabelled[:2] + labelled[2:] + unlabelled[2:])
    by_source = defaultdict(list)
    for v in mixed:
        by_source[v.details["reward_source"]].append(v.score)
    assert by_source["reference"] == [1.0, 0.0, 0.0, 0.0]  # the majority "2" is wrong against the reference
    assert by_source["consensus"] == [1.0, 1.0, 1.0, 0.0]
    assert mixed[0].details["method"] == "numeric"


def test_group_options_must_agree() -> None:
    items = group(["The answer is 4."] * 2) + group(["The answer is 4."], threshold=0.7)
    assert {v.status.value for v in run(items)} == {"error"}


def test_multiple_choice_letters_and_short_text() -> None:
    letters = run(group(["The answer is (B).", "**Answer: B**", "The correct option is (B)", "The answer is (C)."],
                        choice_letters=True))
    assert [v.score for v in letters] == [1.0, 1.0, 1.0, 0.0]
    words = run(group(["The answer is Evelyn.", "The answer is \\text{Evelyn}", "The answer is evelyn",
                       "The answer is Bob."]))
    assert [v.score for v in words] == [1.0, 1.0, 1.0, 0.0]


def test_real_groups_pseudo_label_is_what_members_said(shared_data: Path) -> None:
    """On real ProcessBench groups: every response consensus scores 1 is equivalent, by the math verifier, to the
    pseudo-label, and none of them is a hedge against its true reference."""
    groups = _processbench_groups(shared_data, 3)[:60]
    items = [VerifyItem("consensus", r["response"], None, {}, group=str(g))
             for g, rows in enumerate(groups) for r in rows]
    rows = [r for rows in groups for r in rows]
    verdicts = run(items)
    winners = [(r, v) for r, v in zip(rows, verdicts) if v.score == 1.0]
    assert len(winners) >= 20
    against_label = run([VerifyItem("math", r["response"], v.details["pseudo_label"]) for r, v in winners])
    assert all(v.score == 1.0 for v in against_label), [v.reason for v in against_label if v.score != 1.0]
    against_truth = run([VerifyItem("math", r["response"], r["reference"]) for r, _ in winners])
    assert not [v for v in against_truth if v.status.value == "rejected"]
    # Consensus agrees with the true labels on most responses it scores 1 (the majority is usually right).
    assert sum(r["label"] for r, _ in winners) / len(winners) > 0.8
