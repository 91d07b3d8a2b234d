"""Agreement of ``bfcl_multi_turn`` with bfcl-eval's own ``multi_turn_checker`` on episodes built from BFCL's ground
truth and its plausible mistakes (tests/support/bfcl_episodes.py), in all four multi-turn categories: the episode's
verdict, its error type, and the per-turn verdicts (BFCL's checker run on the episode cut after each turn)."""
from __future__ import annotations

import collections

from tests.support.bfcl_episodes import Oracle, cases, messages
from verifiers.kinds.bfcl.source import CATEGORIES
from verifiers.kinds.bfcl.verifier import BfclMultiTurnVerifier, judge_trajectory

OPTIONS = BfclMultiTurnVerifier().parse_options({})


def test_agreement_with_bfcl_eval_multi_turn_checker() -> None:
    oracle = Oracle()
    total: collections.Counter[str] = collections.Counter()
    agree: collections.Counter[str] = collections.Counter()
    outcomes: collections.Counter[str] = collections.Counter()
    disagreements = []
    for case in cases(CATEGORIES, per_category=6, seed=1):
        category = case.task.id.rsplit("_", 1)[0]
        verdict = judge_trajectory(messages(case), {"task_id": case.task.id}, OPTIONS)
        want = oracle.verdict(case)
        assert verdict.turn_scores is not None
        prefixes = [all(s == 1.0 for s in verdict.turn_scores[:k]) for k in range(1, len(verdict.turn_scores) + 1)]
        got = (verdict.score == 1.0, verdict.details["error_type"], prefixes)
        total[category] += 1
        outcomes[str(want.error_type)] += 1
        if got == (want.valid, want.error_type, want.prefix_valid):
            agree[category] += 1
        elif len(disagreements) < 10:
            disagreements.append((case.name, got, want))
    for category in CATEGORIES:
        assert total[category] >= 60, total
        assert agree[category] / total[category] >= 0.99, (category, agree[category], total[category], disagreements)
    # Every kind of BFCL verdict is exercised, or agreement says little.
    assert set(outcomes) >= {"None", "multi_turn:force_terminated", "multi_turn:empty_turn_model_response",
                             "multi_turn:instance_state_mismatch", "multi_turn:execution_response_mismatch"}, outcomes
    assert outcomes["None"] > sum(outcomes.values()) / 5


def test_inline_task_scores_as_the_task_id() -> None:
    """A reference that carries the task itself (BFCL's prompt entry and its ground truth) reads as the named one."""
    for case in cases(("multi_turn_miss_func", "multi_turn_long_context"), per_category=2, seed=3)[:30]:
        task = case.task
        inline = {"id": task.id, "initial_config": task.initial_config, "involved_classes": task.involved_classes,
                  "question": task.question, "ground_truth": task.ground_truth,
                  "missed_function": task.missed_function}
        by_id = judge_trajectory(messages(case), {"task_id": task.id}, OPTIONS)
        by_value = judge_trajectory(messages(case), inline, OPTIONS)
        assert (by_value.score, by_value.turn_scores) == (by_id.score, by_id.turn_scores), case.name
