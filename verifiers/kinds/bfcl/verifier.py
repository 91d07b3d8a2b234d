"""The ``bfcl_multi_turn`` verifier: a finished multi-turn trajectory replayed on BFCL's simulated APIs and judged
by BFCL's multi-turn checks, turn by turn (``episode.py``).

Reference: ``{"task_id": "multi_turn_base_12"}`` (a task of the installed bfcl-eval data) or the task itself
(``initial_config``, ``involved_classes``, ``question``, ``ground_truth``, ``missed_function``; ``id`` or
``long_context`` for the long-context scenarios). The item carries the conversation as ``messages``: each user
message opens the next BFCL turn (but one right after a step whose calls ran carries their results, as BFCL's
prompt mode sends them), each assistant message is one step (its ``tool_calls`` or its call text); tool results in
the trajectory are ignored, the replay computes its own.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field

from verifiers import conversation
from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.bfcl.actions import split_turns
from verifiers.kinds.bfcl.episode import Episode
from verifiers.kinds.bfcl.source import STEP_LIMIT, task_from_dict
from verifiers.types import InvalidReference, Verdict


class BfclOptions(BaseOptions):
    partial: bool = Field(False, description="Score the fraction of turns passed instead of BFCL's all-or-nothing.")
    irrelevance: bool = Field(False, description="Also fail a turn whose ground truth makes no call when the model "
                                                 "calls a tool in it (BFCL's irrelevance checker, which its runner "
                                                 "does not apply).")
    max_chars: int = Field(200_000, ge=1, le=2_000_000,
                           description="Longest assistant text read for calls; a longer one reads as unreadable.")


def judge_trajectory(messages: list[dict[str, Any]], reference: Any, options: BfclOptions) -> Verdict:
    if not isinstance(reference, dict):
        raise InvalidReference('reference must be {"task_id": ...} or a BFCL multi-turn task object')
    task = task_from_dict(reference)
    turns = split_turns(messages, options.max_chars)
    if len(turns.steps) > len(task.ground_truth):
        raise InvalidReference(f"the conversation has {len(turns.steps)} user turns and the task "
                               f"{len(task.ground_truth)}")
    episode = Episode(task, irrelevance=options.irrelevance)
    unreadable: list[dict[str, Any]] = []
    for index, positions in enumerate(turns.steps):
        if episode.done:
            break
        for pos, step in positions:
            if step.error is not None:
                unreadable.append({"turn": index, "message": pos, "format": step.format, "error": step.error[:300]})
            if step.runs:
                episode.step(step.calls)
                if episode.step_limit_reached:
                    break
        episode.end_turn()
    short = len(turns.steps) < len(task.ground_truth) and not episode.force_terminated
    if short:
        episode.force_terminated = True  # BFCL's runner: fewer result turns than ground-truth turns
    episode.finish()
    scores = [1.0 if t.passed else 0.0 for t in episode.turns]
    score = sum(scores) / len(scores) if options.partial else float(episode.passed)
    passed = sum(t.passed for t in episode.turns)
    reason = f"{passed} of {len(scores)} turns pass BFCL's checks"
    if episode.error_type:
        reason += f"; first failure: {episode.error_type}"
    details: dict[str, Any] = {
        "task_id": task.id, "valid": episode.passed, "error_type": episode.error_type,
        "turns": [t.as_dict() for t in episode.turns], "step_limit": STEP_LIMIT,
    }
    if short:
        details["missing_turns"] = len(task.ground_truth) - len(turns.steps)
    if unreadable:
        details["unreadable_steps"] = unreadable[:16]
    if turns.result_messages:
        details["result_messages"] = turns.result_messages
    if turns.before_first_user:
        details["ignored_assistant_messages"] = turns.before_first_user
    # The contract's per-assistant-message alignment, for trainers that credit each generated message: each
    # message gets its user turn's score (messages before the first user turn get none).
    details["assistant_turn_scores"] = [scores[i] for i, positions in enumerate(turns.steps) for _ in positions]
    verdict = Verdict.ok(score, reason, **details)
    verdict.turn_scores = scores
    return verdict


class BfclMultiTurnVerifier(Verifier[BfclOptions]):
    name = "bfcl_multi_turn"
    version = "1"
    description = (
        "BFCL multi-turn episodes: the trajectory's calls replayed on BFCL's simulated APIs (bfcl-eval) and judged "
        "per turn by BFCL's state, response and empty-turn checks; turn_scores per user turn; 1 only when every turn "
        "passes (partial: the fraction passed)."
    )
    Options = BfclOptions
    binary = False
    default_timeout_s = 30.0

    def check(self, response: str, reference: Any, options: BfclOptions) -> Verdict:
        running = conversation.current()
        if running is None:
            return Verdict.no_answer("bfcl_multi_turn reads the whole trajectory: send the item as messages")
        return judge_trajectory(running.messages, reference, options)


VERIFIERS: list[Verifier[Any]] = [BfclMultiTurnVerifier()]
