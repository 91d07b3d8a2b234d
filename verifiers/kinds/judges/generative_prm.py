"""``generative_prm``: step rewards from an LLM judge that critiques each step of a solution (a generative PRM, as in
ThinkPRM and GenPRM), through the same backends, cache and rate gate as the other judges.

The judge is asked for a verdict on every step, in a strict format: a JSON object ``{"steps": [{"step": k,
"correct": true|false, "critique": "..."}]}`` with each step exactly once, or ThinkPRM's "Step k: ... \\boxed{correct}"
lines. Output that does not give every step a verdict, or gives one twice or for a step that does not exist, is an
``error`` verdict naming what was wrong, never a 0. A step's score is the share of the k samples that found it
correct; scores are aggregated by the PRM rules (min/prod/mean/last, PURE's min-form, clip/delta), and the first
step scored below the threshold is the predicted first error (ProcessBench's label, -1 when none).
"""
from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field

from verifiers.base import BaseOptions
from verifiers.context import Context
from verifiers.kinds.judges import prompts
from verifiers.kinds.judges.backends import Messages
from verifiers.kinds.judges.guards import strip_injection
from verifiers.kinds.judges.parse import JudgeParseError, json_object, without_thinking
from verifiers.kinds.judges.verifier import Ballots, JudgeOptions, JudgeVerifier, ask, refusal
from verifiers.kinds.reward_models.aggregate import Aggregation, aggregate, first_error, step_rewards
from verifiers.kinds.reward_models.steps import SplitRule, split_steps
from verifiers.kinds.reward_models.verifier import prompt_of
from verifiers.types import Verdict

REMOVED_STEP = "[removed: text addressed to the grader]"


class GenerativePrmOptions(JudgeOptions):
    aggregation: Aggregation = Field("min", description="min (PURE's min-form), prod, mean, last, sum, clip or delta.")
    threshold: float = Field(0.5, ge=0, le=1, description="A step scored below it is an error (first_error).")
    split: SplitRule = Field("auto", description="How a response given as text is cut into steps.")
    steps: list[str] | None = Field(None, min_length=1, description="The steps, already split; the response is "
                                    "then not read.")
    prompt: str | None = Field(None, description="The problem; overrides the reference.")
    mode: Literal["all_steps", "per_step"] = Field(
        "all_steps", description="all_steps: one call critiques every step; per_step: one call per step, given the "
        "steps before it (more calls, each step judged on its own).")
    max_steps: int = Field(64, ge=1, le=512, description="Solutions with more steps are rejected before any call.")
    max_tokens: int = Field(2048, ge=1, le=16384, description="Judge output budget per call (critiques are long).")
    check_hedging: bool = Field(
        False, description="Reject solutions stating several final answers (off: a solution that changes its mind "
        "has a wrong step to find, not an answer to refuse).")


# ---------------------------------------------------------------- prompts

_TASK = ("You are a meticulous math teacher checking a student's solution step by step. Decide for each step whether "
         "it is correct: its computations, its logic, and whether it follows from the problem and the steps before "
         "it. A step that repeats or builds on an earlier mistake is incorrect. Do not solve the problem again at "
         "length; check the steps as written. If the solution is unfinished, check only the steps given.")


def _steps_block(steps: list[str], first: int = 1) -> str:
    return json.dumps([{"step": first + i, "text": s} for i, s in enumerate(steps)], ensure_ascii=False, indent=1)


def all_steps_messages(problem: str, steps: list[str]) -> Messages:
    solution = prompts.quote("solution", _steps_block(steps))
    system = [
        _TASK,
        prompts.UNTRUSTED.format(tag=solution.tag),
        f"The solution is a JSON list of {len(steps)} steps numbered 1 to {len(steps)}.",
        'Reply with one JSON object and nothing else: {"steps": [{"step": 1, "critique": "<one or two sentences>", '
        '"correct": true or false}, ...]} with exactly one entry for every step number, in order.',
    ]
    sections = [("Problem", prompts.quote("problem", problem)), ("Solution steps", solution)]
    return prompts.build_messages(system, sections, f"Check each of the {len(steps)} steps inside <{solution.tag}>. "
                                                    "Reply with the JSON object only.")


def one_step_messages(problem: str, earlier: list[str], step: str, index: int) -> Messages:
    context = prompts.quote("earlier-steps", _steps_block(earlier)) if earlier else None
    current = prompts.quote("step", step)
    tags = [current.tag] + ([context.tag] if context else [])
    system = [
        _TASK,
        " ".join(prompts.UNTRUSTED.format(tag=t) for t in tags),
        f"Judge only step {index + 1}; the earlier steps are context.",
        'Reply with one JSON object and nothing else: {"critique": "<one or two sentences>", "correct": true or '
        'false}',
    ]
    sections = [("Problem", prompts.quote("problem", problem)), ("Earlier steps", context),
                (f"Step {index + 1}", current)]
    return prompts.build_messages(system, sections, f"Is step {index + 1} correct? Reply with the JSON object only.")


# ---------------------------------------------------------------- strict parsing

StepMarks = list[tuple[bool, str]]  # (correct, critique) per step

_BOXED_STEP_RE = re.compile(r"^[ \t#*>_-]*step[ \t]*(\d+)[ \t]*[:.)]", re.IGNORECASE | re.MULTILINE)
_BOXED_MARK_RE = re.compile(r"\\boxed\{\s*(correct|incorrect)\s*\}", re.IGNORECASE)


def _from_json(entries: Any, n: int) -> StepMarks:
    if not isinstance(entries, list):
        raise JudgeParseError('critique: "steps" is not a list')
    marks: dict[int, tuple[bool, str]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise JudgeParseError(f"critique: step entry {str(entry)[:80]!r} is not an object")
        index = entry.get("step")
        if not isinstance(index, int) or isinstance(index, bool) or not 1 <= index <= n:
            raise JudgeParseError(f"critique: step number {index!r} is not one of 1..{n}")
        if index in marks:
            raise JudgeParseError(f"critique: step {index} judged twice")
        correct = entry.get("correct")
        if not isinstance(correct, bool):
            raise JudgeParseError(f"critique: step {index} has 'correct': {correct!r}, not true or false")
        marks[index] = (correct, str(entry.get("critique", ""))[:500])
    return _complete(marks, n)


def _from_boxes(text: str, n: int) -> StepMarks:
    """ThinkPRM's format: a "Step k:" section per step ending in \\boxed{correct} or \\boxed{incorrect}."""
    heads = list(_BOXED_STEP_RE.finditer(text))
    marks: dict[int, tuple[bool, str]] = {}
    for i, head in enumerate(heads):
        body = text[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        boxes = _BOXED_MARK_RE.findall(body)
        if not boxes:
            continue  # a step mentioned in passing, not judged here
        index = int(head.group(1))
        if not 1 <= index <= n:
            raise JudgeParseError(f"critique: step number {index} is not one of 1..{n}")
        if index in marks:
            raise JudgeParseError(f"critique: step {index} judged twice")
        if len({b.lower() for b in boxes}) > 1:
            raise JudgeParseError(f"critique: step {index} is boxed both correct and incorrect")
        marks[index] = (boxes[0].lower() == "correct", body.strip()[:500])
    return _complete(marks, n)


def _complete(marks: dict[int, tuple[bool, str]], n: int) -> StepMarks:
    missing = [k for k in range(1, n + 1) if k not in marks]
    if missing:
        raise JudgeParseError(f"critique has no verdict for step(s) {missing[:10]} of {n}")
    return [marks[k] for k in range(1, n + 1)]


def parse_step_marks(text: str, n: int) -> StepMarks:
    """A verdict per step, each step exactly once, or ``JudgeParseError`` naming what is wrong."""
    found = json_object(text, "steps")
    if found:
        return _from_json(found[0]["steps"], n)
    body = without_thinking(text)
    if _BOXED_MARK_RE.search(body):
        return _from_boxes(body, n)
    raise JudgeParseError(f"critique follows neither format (JSON 'steps' or Step k: \\boxed{{correct}}): "
                          f"{text[:200]!r}")


def parse_one_mark(text: str) -> StepMarks:
    found = json_object(text, "correct")
    if found:
        correct = found[0]["correct"]
        if not isinstance(correct, bool):
            raise JudgeParseError(f"critique has 'correct': {correct!r}, not true or false")
        return [(correct, str(found[0].get("critique", ""))[:500])]
    boxes = {b.lower() for b in _BOXED_MARK_RE.findall(without_thinking(text))}
    if len(boxes) == 1:
        return [(boxes.pop() == "correct", text.strip()[-500:])]
    raise JudgeParseError(f"critique of the step has no single verdict: {text[:200]!r}")


# ---------------------------------------------------------------- the verifier

def guarded_steps(steps: list[str], injection: str) -> tuple[list[str], list[str]]:
    """Each step with judge-directed sentences dropped (the step kept, as a marker, if nothing else was in it), so the
    judge's step numbers stay the caller's."""
    if injection == "keep":
        return steps, []
    kept, dropped = [], []
    for step in steps:
        cleaned, gone = strip_injection(step)
        dropped += gone
        kept.append(cleaned if cleaned.strip() else REMOVED_STEP)
    return kept, dropped


@dataclass
class _StepBallots:
    """Every step's votes (one per readable sample) and the first sample's critique of it, with the call account."""

    merged: Ballots = field(default_factory=Ballots)
    votes: list[list[bool]] = field(default_factory=list)
    critiques: list[str] = field(default_factory=list)


class GenerativePrmVerifier(JudgeVerifier):
    name = "generative_prm"
    description = ("Generative PRM: an LLM judge critiques each step; per-step scores (share of samples finding the "
                   "step correct), aggregated by min/prod/mean/last, and the first wrong step.")
    Options: ClassVar[type[BaseOptions]] = GenerativePrmOptions
    binary = False
    default_timeout_s: ClassVar[float] = 300.0

    async def judge(self, response: str, reference: Any, options: JudgeOptions, ctx: Context) -> Verdict:
        assert isinstance(options, GenerativePrmOptions)
        raw_steps = options.steps or split_steps(response, options.split)
        if not raw_steps:
            return Verdict.no_answer("the response holds no steps")
        if len(raw_steps) > options.max_steps:
            return Verdict.rejected(f"{len(raw_steps)} steps, over the limit of {options.max_steps}",
                                    guard="too_many_steps", judge_called=False)
        guarded = self.guard("\n\n".join(raw_steps), options)
        if guarded.refusal:
            return refusal(guarded)
        steps, dropped = guarded_steps(raw_steps, options.injection)
        problem = prompt_of(reference, options.prompt)
        ballots = await self._ballots(ctx, options, problem, steps)
        scores = [sum(v) / len(v) for v in ballots.votes]
        fe = first_error(scores, options.threshold)
        details: dict[str, Any] = {
            "backend": ballots.merged.backend, "samples": options.samples, "mode": options.mode,
            "calls": dict(ballots.merged.sources), "unreadable": len(ballots.merged.unreadable),
            "step_scores": scores, "first_error": -1 if fe is None else fe,
            "step_rewards": step_rewards(scores, options.aggregation, options.threshold),
            "critiques": ballots.critiques,
        }
        if dropped:
            details["injection_stripped"] = dropped
        score = aggregate(scores, options.aggregation, options.threshold)
        where = "no wrong step" if fe is None else f"first wrong step {fe}"
        return Verdict.ok(score, f"{options.aggregation} over {len(steps)} judged steps; {where}", **details)

    async def _ballots(self, ctx: Context, options: GenerativePrmOptions, problem: str,
                       steps: list[str]) -> _StepBallots:
        n = len(steps)
        if options.mode == "all_steps":
            groups = [await ask(ctx, options, all_steps_messages(problem, steps),
                                lambda text: parse_step_marks(text, n))]
        else:
            groups = list(await asyncio.gather(*(
                ask(ctx, options, one_step_messages(problem, steps[:k], steps[k], k), parse_one_mark)
                for k in range(n))))
        result = _StepBallots()
        for group in groups:
            result.merged.absorb(group)
            per_sample: list[StepMarks] = group.parsed
            width = len(per_sample[0])
            for j in range(width):
                result.votes.append([sample[j][0] for sample in per_sample])
                result.critiques.append(per_sample[0][j][1][:300])
        return result


VERIFIERS = [GenerativePrmVerifier()]
