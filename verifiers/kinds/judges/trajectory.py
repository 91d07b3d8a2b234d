"""The ``trajectory_checklist`` judge: checklist items over a whole agent trajectory, each with its evidence turn.

The judge sees the whole conversation (user, assistant, tool calls and tool results), each assistant turn labelled;
an item is met only when a judge quote from the assistant turn it names backs it (a quote from elsewhere, a tool's
output or a made-up quote counts against it). The score is the weighted share of items met; ``gated`` makes it 0
unless every hard item is met. ``turn_scores`` give each assistant turn the weighted share of the items it is the
evidence for (0 for a turn no item names), for trainers that assign credit per turn.
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from verifiers import conversation
from verifiers.base import Verifier
from verifiers.context import Context
from verifiers.kinds.judges import prompts
from verifiers.kinds.judges.guards import GuardResult, strip_injection
from verifiers.kinds.judges.verifier import (
    Criterion,
    JudgeOptions,
    JudgeVerifier,
    RubricOptions,
    _criteria,
    call_details,
    mark_criteria,
)
from verifiers.kinds.tool_calls.parse import content_text
from verifiers.types import InvalidReference, Verdict


class TrajectoryItem(Criterion):
    hard: bool = Field(False, description="A hard item: with the gated option, the score is 0 unless it is met.")
    turn: int | None = Field(None, description="The assistant turn (0-based; negative counts from the end) that "
                                               "holds its evidence; none: any assistant turn.")


class TrajectoryOptions(RubricOptions):
    gated: bool = Field(False, description="Score 0 unless every hard item (marked hard, or named in hard) is met.")
    hard: list[str] = Field(default_factory=list, description="Ids of hard items, beside those marked hard.")
    max_response_chars: int = Field(60_000, ge=1, description="Longer trajectories are rejected before any call.")


def parse_items(reference: Any) -> tuple[list[TrajectoryItem], str | None]:
    return _criteria(reference, "items", TrajectoryItem)


def _calls(message: dict[str, Any]) -> list[str]:
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            out.append(f"call {fn.get('name')}({args if isinstance(args, str) else json.dumps(args)})")
    return out


def render(messages: list[dict[str, Any]], injection: str) -> tuple[str, list[str], list[str]]:
    """(transcript, each assistant turn's text, sentences dropped as aimed at the judge). Assistant turns are the
    policy's writing: judge-directed sentences are stripped from them (text and call arguments alike)."""
    lines: list[str] = []
    turns: list[str] = []
    dropped: list[str] = []
    for m in messages:
        role = m.get("role") if isinstance(m, dict) else None
        if role == "assistant":
            parts = [content_text(m.get("content")), *_calls(m)]
            if injection != "keep":
                cleaned = [strip_injection(p) for p in parts]
                dropped += [d for _, ds in cleaned for d in ds]
                parts = [c for c, _ in cleaned]
            text = "\n".join(p for p in parts if p)
            lines.append(f"[assistant turn {len(turns)}]\n{text}")
            turns.append(text)
        elif role == "tool":
            lines.append(f"[tool result {m.get('tool_call_id', '')}]\n{content_text(m.get('content'))}")
        elif role in ("user", "system"):
            lines.append(f"[{role}]\n{content_text(m.get('content'))}")
    return "\n\n".join(lines), turns, dropped


class TrajectoryChecklistVerifier(JudgeVerifier):
    name = "trajectory_checklist"
    description = ("Checklist items over a whole trajectory, each with its evidence turn, judged by an LLM; "
                   "weighted share met, gated on hard items; turn_scores per assistant turn.")
    Options = TrajectoryOptions
    binary = False

    async def judge(self, response: str, reference: Any, options: JudgeOptions, ctx: Context) -> Verdict:
        assert isinstance(options, TrajectoryOptions)
        items, question = parse_items(reference)
        unknown = set(options.hard) - {i.id for i in items}
        if unknown:
            raise InvalidReference(f"hard names unknown items: {', '.join(sorted(unknown))}")
        running = conversation.current()  # the item's trajectory; a plain response is a one-turn one
        messages = running.messages if running is not None else [{"role": "assistant", "content": response}]
        transcript, turns, dropped = render(messages, options.injection)
        if not turns:
            return Verdict.no_answer("the trajectory has no assistant turn")
        if len(transcript) > options.max_response_chars:
            return Verdict.rejected(f"trajectory has {len(transcript)} characters, over the judge limit of "
                                    f"{options.max_response_chars}", guard="too_long", judge_called=False)
        if dropped and options.injection == "reject":
            return Verdict.rejected("the trajectory addresses the judge (prompt injection)", guard="injection",
                                    judge_called=False, injection=dropped)
        evidence_turn = {i.id: _turn_index(i.turn, len(turns)) for i in items}
        judged = [i for i in items if i.turn is None or evidence_turn[i.id] is not None]
        rows: list[dict[str, Any]] = []
        details: dict[str, Any] = {"judge_called": False}
        if judged:
            prompt_items: list[Criterion] = [
                Criterion(id=i.id, text=i.text if i.turn is None else f"{i.text} (evidence: assistant turn "
                                                                       f"{evidence_turn[i.id]})")
                for i in judged]
            everywhere = "\n".join(turns)  # an item with no evidence turn: any assistant turn, never a tool result
            evidence_in = {i.id or "": everywhere if (t := evidence_turn[i.id]) is None else turns[t] for i in judged}
            rows, ballots = await mark_criteria(
                ctx, options, lambda group: prompts.trajectory_messages(transcript, group, question), transcript,
                prompt_items, evidence_in=evidence_in)
            guarded = GuardResult(transcript, notes={"injection": dropped} if dropped else {})
            details = call_details(ballots, options, guarded)
        by_id = {r["id"]: r for r in rows}
        hard = {i.id for i in items if i.hard or i.required} | set(options.hard)
        out = []
        for i in items:
            row = by_id.get(i.id, {"met": False, "turn_missing": True, "evidence": ""})
            out.append({**row, "id": i.id, "weight": i.weight, "hard": i.id in hard, "turn": evidence_turn[i.id]})
        return _verdict(out, len(turns), options.gated, details)


def _turn_index(turn: int | None, n: int) -> int | None:
    if turn is None:
        return None
    index = turn + n if turn < 0 else turn
    return index if 0 <= index < n else None


def _verdict(rows: list[dict[str, Any]], n_turns: int, gated: bool, details: dict[str, Any]) -> Verdict:
    share = sum(r["weight"] for r in rows if r["met"]) / sum(r["weight"] for r in rows)
    hard_failed = [r["id"] for r in rows if r["hard"] and not r["met"]]
    gate_closed = gated and bool(hard_failed)
    turn_scores = []
    for t in range(n_turns):
        mine = [r for r in rows if r["turn"] == t]
        weight = sum(r["weight"] for r in mine)
        turn_scores.append(0.0 if gate_closed or not weight else sum(r["weight"] for r in mine if r["met"]) / weight)
    met = sum(r["met"] for r in rows)
    reason = (f"hard items not met: {', '.join(hard_failed)}" if gate_closed
              else f"{met} of {len(rows)} items met")
    verdict = Verdict.ok(0.0 if gate_closed else share, reason, items=rows, weighted_share=share,
                         hard_failed=hard_failed, gated=gated, **details)
    verdict.turn_scores = turn_scores
    return verdict


VERIFIERS: list[Verifier[Any]] = [TrajectoryChecklistVerifier()]
