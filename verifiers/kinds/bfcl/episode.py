"""One BFCL multi-turn episode, judged turn by turn the way bfcl-eval's ``multi_turn_checker`` judges it.

Per turn, the model's decoded steps run on the model's instances and the turn's ground-truth calls on a second set
loaded from the same scenario. A turn whose ground truth is empty is not checked (BFCL's irrelevance checker is not
applied by its runner; ``irrelevance=True`` applies it). Otherwise it fails when the model made no decodable call in
it (``empty_turn_model_response``), when a public attribute of an instance differs from the ground truth's
(``instance_state_mismatch``), or when a ground-truth result is missing from the model's results of all turns so far
(``execution_response_mismatch``). BFCL stops at the first failing turn; here later turns are still judged on the
state the model left, so ``turn_scores`` says which turns passed, and the episode passes only when all do. A turn
that hits the step limit before the last turn ends the episode (``force_terminated``), as BFCL's inference does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifiers.kinds.bfcl.executor import ApiSet, Invocation, missing_results, parse_ground_truth, state_differences
from verifiers.kinds.bfcl.source import STEP_LIMIT, Task


@dataclass
class TurnVerdict:
    index: int
    passed: bool
    error_type: str | None = None
    reason: str = ""
    steps: int = 0
    ground_truth_results: list[str] = field(default_factory=list)
    differences: dict[str, list[str]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"turn": self.index, "passed": self.passed, "steps": self.steps}
        if not self.passed:
            out.update(error_type=self.error_type, reason=self.reason)
        if self.differences:
            out["differences"] = self.differences
        if self.missing:
            out["missing"] = [m[:300] for m in self.missing[:8]]
        return out


class Episode:
    """The two instance sets of one task and the model's results so far; driven a step and a turn at a time, by the
    verifier's replay and by a live session alike."""

    def __init__(self, task: Task, irrelevance: bool = False) -> None:
        self.task = task
        self.irrelevance = irrelevance
        self.model = ApiSet(task)
        self.truth = ApiSet(task)
        self.truth_calls = [[parse_ground_truth(c) for c in turn] for turn in task.ground_truth]
        self.all_results: list[str] = []
        self.turn = 0
        self.steps = 0  # executed (decoded, non-empty) steps in the current turn
        self.turns: list[TurnVerdict] = []
        self.force_terminated = False

    @property
    def n_turns(self) -> int:
        return len(self.task.ground_truth)

    @property
    def done(self) -> bool:
        return self.force_terminated or self.turn >= self.n_turns

    @property
    def step_limit_reached(self) -> bool:
        return self.steps > STEP_LIMIT

    def step(self, calls: list[Invocation]) -> list[str]:
        """One decoded step of the model: its calls run on the model's instances, their results returned."""
        results = self.model.execute(calls)
        self.all_results.extend(results)
        if calls:
            self.steps += 1
        return results

    def record(self, results: list[str]) -> None:
        """A step that could not run to its end (past its time limit): its results are the given errors and it
        changed nothing."""
        self.all_results.extend(results)
        self.steps += 1

    def end_turn(self) -> TurnVerdict:
        """Replay the turn's ground truth and judge the turn; a turn ended by the step limit before the last turn
        ends the episode."""
        index = self.turn
        truth = self.truth.execute(self.truth_calls[index])
        verdict = self._judge(index, truth)
        self.turns.append(verdict)
        if self.step_limit_reached and index + 1 < self.n_turns:
            self.force_terminated = True
        self.turn += 1
        self.steps = 0
        return verdict

    def _judge(self, index: int, truth: list[str]) -> TurnVerdict:
        v = TurnVerdict(index, True, steps=self.steps, ground_truth_results=truth)
        if not self.task.ground_truth[index]:
            if self.irrelevance and self.steps:
                v.passed, v.error_type = False, "multi_turn:irrelevance_error:decoder_success"
                v.reason = f"the model called tools in turn {index}, where the ground truth makes no call"
            return v
        if not self.steps:
            v.passed, v.error_type = False, "multi_turn:empty_turn_model_response"
            v.reason = f"Model response list is empty for turn {index}"
            return v
        v.differences = state_differences(self.model, self.truth)
        if v.differences:
            v.passed, v.error_type = False, "multi_turn:instance_state_mismatch"
            v.reason = "instance state differs from the ground truth's: " + ", ".join(
                f"{cls}.{attr}" for cls, attrs in v.differences.items() for attr in attrs)
            return v
        v.missing = missing_results(self.all_results, truth)
        if v.missing:
            v.passed, v.error_type = False, "multi_turn:execution_response_mismatch"
            v.reason = (f"Model response execution results so far does not contain all the ground truth response "
                        f"execution results for turn {index}")
        return v

    def finish(self) -> None:
        """Judge the turns the episode never reached (force-terminated): each fails."""
        while self.turn < self.n_turns:
            self.turns.append(TurnVerdict(self.turn, False, "multi_turn:force_terminated",
                                          f"the episode was force-terminated after {STEP_LIMIT} steps in a turn"))
            self.turn += 1

    @property
    def passed(self) -> bool:
        return not self.force_terminated and len(self.turns) == self.n_turns and all(t.passed for t in self.turns)

    @property
    def error_type(self) -> str | None:
        """The episode's failure as BFCL names it: force termination first, else the first failing turn's."""
        if self.force_terminated:
            return "multi_turn:force_terminated"
        return next((t.error_type for t in self.turns if not t.passed), None)
