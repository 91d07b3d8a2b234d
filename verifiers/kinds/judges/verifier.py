"""The judge verifiers: reference equivalence, rubric, checklist and pairwise preference, with k-sample voting,
pre-call guards and an optional rule-based first pass (hybrid mode)."""
from __future__ import annotations

import asyncio
import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from verifiers import conversation
from verifiers.base import BaseOptions, Verifier
from verifiers.context import Context
from verifiers.conversation import inherit
from verifiers.kinds.judges import prompts
from verifiers.kinds.judges.backends import Messages, Sampling
from verifiers.kinds.judges.guards import GuardResult, check_response, guard_turns
from verifiers.kinds.judges.parse import CriterionMark, JudgeParseError, parse_criteria, parse_verdict, parse_winner
from verifiers.kinds.judges.registry import JUDGES
from verifiers.types import InvalidReference, UnknownVerifier, Verdict, VerifierFailed, VerifyItem

T = TypeVar("T")
JUDGE_VERIFIERS = ("judge_reference", "rubric", "checklist", "pairwise", "generative_prm", "trajectory_checklist")


class JudgeOptions(BaseOptions):
    backend: str | None = Field(None, description="Name of a judge backend configured on the server (never a URL).")
    samples: int = Field(1, ge=1, le=16, description="Judge calls per item; the majority decides (k-sample voting).")
    temperature: float | None = Field(None, ge=0, le=2, description="Default 0 for one sample, 0.7 for several.")
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(512, ge=1, le=16384, description="Judge output budget per call.")
    seed: int | None = Field(None, description="Sent to the backend (plus the sample index) when set.")
    max_response_chars: int = Field(20_000, ge=1, description="Longer responses are rejected before any call.")
    injection: Literal["strip", "reject", "keep"] = Field(
        "strip", description="Sentences addressing the judge: dropped before quoting, rejected, or kept (quoted).")
    check_hedging: bool = Field(True, description="Reject responses that state several different final answers.")

    def sampling(self, index: int) -> Sampling:
        temperature = self.temperature if self.temperature is not None else (0.0 if self.samples == 1 else 0.7)
        return Sampling(temperature, self.top_p, self.max_tokens, self.seed, index)


@dataclass
class Ballots:
    """Parsed judge outputs of one prompt (k samples) and what it took to get them."""

    backend: str = ""
    parsed: list[Any] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    sources: Counter[str] = field(default_factory=Counter)
    raw: list[str] = field(default_factory=list)

    def absorb(self, other: Ballots) -> None:
        """Add another prompt's call accounting (not its parsed votes)."""
        self.backend = other.backend
        self.sources.update(other.sources)
        self.unreadable += other.unreadable
        self.raw += other.raw


async def ask(ctx: Context, options: JudgeOptions, messages: Messages, parse: Callable[[str], T]) -> Ballots:
    """k samples of one prompt through the cache; fewer than half readable is an error, not a vote."""
    judges = ctx.resource(JUDGES)
    done = await asyncio.gather(
        *(judges.complete(messages, options.sampling(i), options.backend) for i in range(options.samples))
    )
    ballots = Ballots(backend=judges.get(options.backend).name)
    for completion in done:
        ballots.sources[completion.source] += 1
        ballots.raw.append(completion.text[:300])
        try:
            ballots.parsed.append(parse(completion.text))
        except JudgeParseError as exc:
            ballots.unreadable.append(str(exc)[:300])
    if len(ballots.parsed) < (options.samples + 1) // 2:
        raise JudgeParseError(
            f"{len(ballots.unreadable)} of {options.samples} judge outputs unreadable: {ballots.unreadable[0]}"
        )
    return ballots


@dataclass
class Graded:
    """The guards' decision, what the judge reads, and the text criterion evidence must be quoted from (the
    model's own turns: a quote of the user's question is no evidence)."""

    guarded: GuardResult
    candidate: prompts.Candidate
    own: str


def yes_vote(values: list[bool]) -> tuple[bool, float]:
    """Strict majority says yes; a tie is no (a judge's false positive is the costlier mistake)."""
    yes = sum(values)
    return yes * 2 > len(values), max(yes, len(values) - yes) / len(values)


class JudgeVerifier(Verifier[JudgeOptions]):
    execution = "async"
    default_timeout_s: ClassVar[float] = 120.0
    Options: ClassVar[type[BaseOptions]] = JudgeOptions  # each judge names its JudgeOptions subclass

    def guard(self, response: str, options: JudgeOptions, **kw: Any) -> GuardResult:
        return check_response(response, max_chars=options.max_response_chars, injection=options.injection,
                              check_hedging=options.check_hedging, **kw)

    def graded(self, response: str, options: JudgeOptions, **kw: Any) -> Graded:
        """The guards, then what the judge reads: the response, or for a trajectory the whole conversation with
        every model-written part through the injection guard. The final turn's text meets every guard (filler,
        noise, hedging, a final answer); an answer the model corrected in an earlier turn is not a hedge."""
        guarded = self.guard(response, options, **kw)
        trajectory = conversation.current()
        if guarded.refusal or trajectory is None:
            return Graded(guarded, prompts.Candidate(guarded.text), guarded.text)
        messages, dropped = guard_turns(trajectory.messages, guarded.text, options.injection)
        notes = dict(guarded.notes)
        if dropped:
            earlier = notes.get("injection")
            notes["injection"] = [*(earlier if isinstance(earlier, list) else []), *dropped]
            if options.injection == "reject":
                return Graded(GuardResult(guarded.text, "conversation addresses the judge (prompt injection)",
                                          "injection", notes), prompts.Candidate(""), "")
        text = prompts.render_conversation(messages)
        if len(text) > options.max_response_chars:
            return Graded(GuardResult(guarded.text, f"conversation has {len(text)} characters as the judge reads "
                                      f"it, over the judge limit of {options.max_response_chars}", "too_long", notes),
                          prompts.Candidate(""), "")
        own = prompts.render_conversation([m for m in messages if m.get("role") in ("assistant", "tool")])
        return Graded(GuardResult(guarded.text, None, None, notes), prompts.Candidate(text, conversation=True), own)

    async def acheck(self, response: str, reference: Any, options: JudgeOptions, ctx: Context) -> Verdict:
        try:
            return await self.judge(response, reference, options, ctx)
        except VerifierFailed as exc:  # a judge's fault or unreadable answers: say which backend, as every verdict does
            exc.details.setdefault("backend", options.backend)
            raise

    async def judge(self, response: str, reference: Any, options: JudgeOptions, ctx: Context) -> Verdict:
        raise NotImplementedError


def refusal(guarded: GuardResult) -> Verdict:
    assert guarded.refusal is not None
    if guarded.code == "no_final_answer":
        return Verdict.no_answer(guarded.refusal, guard=guarded.code, **guarded.notes)
    return Verdict.rejected(guarded.refusal, guard=guarded.code, judge_called=False, **guarded.notes)


def call_details(ballots: Ballots, options: JudgeOptions, guarded: GuardResult) -> dict[str, Any]:
    details: dict[str, Any] = {
        "backend": ballots.backend, "samples": options.samples, "calls": dict(ballots.sources),
        "unreadable": len(ballots.unreadable), "judge_output": ballots.raw if options.samples > 1 else ballots.raw[0],
    }
    if "injection" in guarded.notes:
        details["injection_stripped"] = guarded.notes["injection"]
    return details


# ---------------------------------------------------------------- judge_reference

class ReferenceOptions(JudgeOptions):
    hybrid: str | None = Field(
        None, description="A rule verifier (e.g. 'math') tried first; a confident verdict settles the item.")
    hybrid_options: dict[str, Any] = Field(default_factory=dict, description="Options for the rule verifier.")
    hybrid_settles: Literal["correct", "any"] = Field(
        "correct", description="'correct': only a rule's ok/1.0 settles; 'any': any ok verdict settles.")
    require_final_answer: bool = Field(False, description="no_answer unless a \\boxed{} or 'the answer is' exists.")

    @field_validator("hybrid")
    @classmethod
    def _not_a_judge(cls, value: str | None) -> str | None:
        if value in JUDGE_VERIFIERS:
            raise ValueError("hybrid must name a rule-based verifier, not a judge")
        return value


def _question(reference: dict[str, Any]) -> str | None:
    question = reference.get("question", reference.get("prompt"))
    if question is not None and not isinstance(question, str):
        raise InvalidReference("reference.question must be a string")
    return question


def _reference_parts(reference: Any) -> tuple[str, str | None]:
    if isinstance(reference, (int, float)) and not isinstance(reference, bool):
        return str(reference), None
    if isinstance(reference, str) and reference.strip():
        return reference, None
    if isinstance(reference, dict) and isinstance(reference.get("answer"), (str, int, float)) \
            and str(reference["answer"]).strip():
        return str(reference["answer"]), _question(reference)
    raise InvalidReference('reference must be the answer (string or number) or {"answer": ..., "question": ...}')


class JudgeReferenceVerifier(JudgeVerifier):
    name = "judge_reference"
    description = "An LLM judge decides whether the response's final answer is equivalent to the reference."
    Options = ReferenceOptions

    async def judge(self, response: str, reference: Any, options: JudgeOptions, ctx: Context) -> Verdict:
        assert isinstance(options, ReferenceOptions)
        answer, question = _reference_parts(reference)
        graded = self.graded(response, options, require_final_answer=options.require_final_answer)
        guarded = graded.guarded
        if guarded.refusal:
            return refusal(guarded)
        if options.hybrid:
            try:
                rule = await ctx.verify(
                    inherit(VerifyItem(options.hybrid, response, answer, dict(options.hybrid_options))))
            except (UnknownVerifier, ValidationError) as exc:
                raise VerifierFailed(f"hybrid rule verifier {options.hybrid!r} cannot run: {str(exc)[:300]}") from exc
            confident = rule.score == 1.0 or (options.hybrid_settles == "any" and rule.score is not None)
            if rule.status.value == "ok" and confident:
                return Verdict.ok(rule.score or 0.0, f"settled by {options.hybrid}: {rule.reason}",
                                  settled_by=options.hybrid, judge_called=False, rule=rule.to_dict())
        ballots = await ask(ctx, options, prompts.reference_messages(graded.candidate, answer, question), parse_verdict)
        yes, agreement = yes_vote([b.value for b in ballots.parsed])
        details = call_details(ballots, options, guarded)
        details.update(votes=[b.value for b in ballots.parsed], agreement=agreement,
                       judge_reason=ballots.parsed[0].reason, parse=ballots.parsed[0].method)
        if options.hybrid:
            details["rule"] = rule.to_dict()
        return Verdict.ok(1.0 if yes else 0.0, "judge: equivalent" if yes else "judge: not equivalent", **details)


# ---------------------------------------------------------------- rubric and checklist

class Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, min_length=1, max_length=64)
    text: str = Field(..., min_length=1)
    weight: float = Field(1.0, gt=0)
    required: bool = False


class RubricOptions(JudgeOptions):
    per_criterion_calls: bool = Field(
        False, description="One judge call per criterion (costlier, no cross-talk) instead of one call for all.")
    check_evidence: bool = Field(
        True, description="A criterion marked met with a quote that is not in the response counts as not met.")


def _evidence_found(evidence: str, response: str) -> bool:
    """Each span of the quote (split at ellipses) must appear in the response, ignoring case and spacing."""
    def norm(s: str) -> str:
        return re.sub(r"\s+", " ", s.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')).lower()

    haystack = norm(response)
    spans = [norm(p).strip(" \"'`") for p in re.split(r"\.\.\.|\u2026", evidence)]
    return all(span in haystack for span in spans if span)


CriterionT = TypeVar("CriterionT", bound="Criterion")


def _criteria(reference: Any, key: str, model: type[CriterionT]) -> tuple[list[CriterionT], str | None]:
    question = None
    if isinstance(reference, dict):
        question = _question(reference)
        reference = reference.get(key, reference.get("criteria"))
    if not isinstance(reference, list) or not reference:
        raise InvalidReference(f"reference must be a non-empty list of criteria or {{\"{key}\": [...]}}")
    try:
        items = [model.model_validate({"text": c} if isinstance(c, str) else c) for c in reference]
    except ValidationError as exc:
        raise InvalidReference(f"bad criterion: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    for i, c in enumerate(items):
        c.id = c.id or f"c{i + 1}"
    ids = [c.id for c in items]
    if len(set(ids)) != len(ids):
        raise InvalidReference("criterion ids must be unique")
    return items, question


def _marks(out: str, ids: Sequence[str]) -> dict[str, CriterionMark]:
    """The criterion marks of one judge output (the parser for a group of criteria)."""
    return parse_criteria(out, ids)[0]


PromptBuilder = Callable[[Sequence[tuple[str, str]]], Messages]  # the judge's messages for a group of criteria


async def mark_criteria(
    ctx: Context, options: RubricOptions, prompt: PromptBuilder, own: str, criteria: list[Criterion], *,
    evidence_in: dict[str, str] | None = None,
) -> tuple[list[dict[str, Any]], Ballots]:
    """Each criterion's majority mark over k samples, with fabricated evidence counted against it. ``prompt`` builds
    the judge's messages for a group of (id, text) criteria. A quote must be found in ``evidence_in[id]`` when given
    (a trajectory item's own turn), else anywhere in ``own`` (the model's own text: a quote of the user's question is
    no evidence)."""
    pairs = [(c.id or "", c.text) for c in criteria]
    groups = [pairs[i:i + 1] for i in range(len(pairs))] if options.per_criterion_calls else [pairs]
    results = await asyncio.gather(*(
        ask(ctx, options, prompt(group),
            functools.partial(_marks, ids=[cid for cid, _ in group]))
        for group in groups
    ))
    merged = Ballots()
    marks: dict[str, list[CriterionMark]] = {}
    for ballots in results:
        merged.absorb(ballots)
        for sample in ballots.parsed:
            for cid, mark in sample.items():
                marks.setdefault(cid, []).append(mark)
    rows = []
    for c in criteria:
        votes = []
        fabricated = 0
        haystack = (evidence_in or {}).get(c.id or "", own)
        for mark in marks[c.id or ""]:
            honest = not (options.check_evidence and mark.met and mark.evidence
                          and not _evidence_found(mark.evidence, haystack))
            fabricated += not honest
            votes.append(mark.met and honest)
        met, agreement = yes_vote(votes)
        evidence = next((m.evidence for m in marks[c.id or ""] if m.met and m.evidence), "")
        row = {"id": c.id, "met": met, "weight": c.weight, "required": c.required, "agreement": agreement,
               "evidence": evidence[:300]}
        if fabricated:
            row["evidence_not_in_response"] = fabricated
        rows.append(row)
    return rows, merged


class CriteriaVerifier(JudgeVerifier):
    """Shared flow of rubric and checklist: criteria from the reference, guards, marks, then a score."""

    reference_key: ClassVar[str] = "criteria"
    binary = False

    def criteria(self, reference: Any) -> tuple[list[Criterion], str | None]:
        return _criteria(reference, self.reference_key, Criterion)

    def score(self, rows: list[dict[str, Any]], options: Any) -> tuple[float, str, dict[str, Any]]:
        raise NotImplementedError

    async def judge(self, response: str, reference: Any, options: JudgeOptions, ctx: Context) -> Verdict:
        assert isinstance(options, RubricOptions)
        criteria, question = self.criteria(reference)
        graded = self.graded(response, options)
        guarded = graded.guarded
        if guarded.refusal:
            return refusal(guarded)
        rows, ballots = await mark_criteria(
            ctx, options, lambda group: prompts.criteria_messages(graded.candidate, group, question), graded.own,
            criteria)
        score, reason, details = self.score(rows, options)
        return Verdict.ok(score, reason, **details, **call_details(ballots, options, guarded))


class RubricVerifier(CriteriaVerifier):
    name = "rubric"
    description = ("Reference holds criteria [{id, text, weight, required}]; score is the weighted share met, "
                   "0 when a required criterion fails.")
    Options = RubricOptions

    def score(self, rows: list[dict[str, Any]], options: Any) -> tuple[float, str, dict[str, Any]]:
        failed_required = [r["id"] for r in rows if r["required"] and not r["met"]]
        share = sum(r["weight"] for r in rows if r["met"]) / sum(r["weight"] for r in rows)
        reason = (f"required criteria not met: {', '.join(failed_required)}" if failed_required
                  else f"{sum(r['met'] for r in rows)} of {len(rows)} criteria met")
        details = {"criteria": rows, "required_failed": failed_required, "weighted_share": share}
        return (0.0 if failed_required else share), reason, details


class ChecklistOptions(RubricOptions):
    reward: Literal["dense", "sparse"] = Field(
        "dense", description="dense: share of items met; sparse: 1 only when every item is met.")


class ChecklistVerifier(CriteriaVerifier):
    name = "checklist"
    description = "Reference is a list of yes/no items; reward is the share met (dense) or all-met (sparse)."
    Options = ChecklistOptions
    reference_key = "items"

    def criteria(self, reference: Any) -> tuple[list[Criterion], str | None]:
        items, question = _criteria(reference, self.reference_key, Criterion)
        for item in items:  # a checklist item is plain yes/no: equal weight, none gating
            item.weight, item.required = 1.0, False
        return items, question

    def score(self, rows: list[dict[str, Any]], options: Any) -> tuple[float, str, dict[str, Any]]:
        met = sum(r["met"] for r in rows)
        score = met / len(rows) if options.reward == "dense" else float(met == len(rows))
        return score, f"{met} of {len(rows)} items met", {"items": rows, "reward": options.reward}


# ---------------------------------------------------------------- pairwise

class PairwiseOptions(JudgeOptions):
    both_orders: bool = Field(
        True, description="Judge (response, other) and (other, response) to cancel position bias.")


_POINTS = {"response": 1.0, "tie": 0.5, "other": 0.0}


class PairwiseVerifier(JudgeVerifier):
    name = "pairwise"
    description = ('Reference is {"other": <competing response>, "question": <task>}; score 1 when the response '
                   "is preferred, 0 when the other is, 0.5 for a tie or an order-dependent verdict.")
    Options = PairwiseOptions
    binary = False

    async def judge(self, response: str, reference: Any, options: JudgeOptions, ctx: Context) -> Verdict:
        assert isinstance(options, PairwiseOptions)
        if not isinstance(reference, dict) or not isinstance(reference.get("other"), str):
            raise InvalidReference('reference must be {"other": "<competing response>", "question": "<task>"}')
        question = _question(reference)
        guarded = self.guard(response, options)
        if guarded.refusal:
            return refusal(guarded)
        other = reference["other"]
        orders = [("response", "other")] + ([("other", "response")] if options.both_orders else [])
        texts = {"response": guarded.text, "other": other}
        rounds = await asyncio.gather(*(
            ask(ctx, options, prompts.pairwise_messages(texts[a], texts[b], question), lambda out: parse_winner(out)[0])
            for a, b in orders
        ))
        per_order = []
        points = []
        merged = Ballots()
        for (a, b), ballots in zip(orders, rounds):
            picks = [{"A": a, "B": b, "tie": "tie"}[w] for w in ballots.parsed]
            per_order.append({"A": a, "B": b, "winners": picks})
            points += [_POINTS[p] for p in picks]
            merged.absorb(ballots)
        score = sum(points) / len(points)
        winner = "response" if score > 0.5 else "other" if score < 0.5 else "tie"
        order_winners = [Counter(o["winners"]).most_common(1)[0][0] for o in per_order]
        details = call_details(merged, options, guarded)
        details.update(winner=winner, orders=per_order, consistent=len(set(order_winners)) == 1)
        return Verdict.ok(score, f"preferred: {winner}", **details)


VERIFIERS: list[Verifier[Any]] = [
    JudgeReferenceVerifier(), RubricVerifier(), ChecklistVerifier(), PairwiseVerifier()]
