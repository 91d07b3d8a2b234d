"""The ``consensus`` verifier: label-free rewards from a group's majority answer (test-time RL, self-consistency).

Per item (in the worker pool, like ``math``): read the final answer (``reading``); an item with a reference is also
scored against it exactly as ``math`` would (semi-supervised batches). Per request, once all items are in
(``finish_group``): weigh the votes, cluster them (``clusters``), and when the heaviest cluster holds more than
``threshold`` of the vote weight, its members score 1 and the other readable answers 0. Otherwise every readable
answer gets a null score with ``no_consensus`` (tie, weak plurality) or ``group_too_small`` (fewer than ``min_size``
votes): an abstention, never a guess. Hedged, content-free and answerless responses never vote and score 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verifiers.base import Prepared, Verifier, VerifierLookup
from verifiers.context import Context
from verifiers.kinds.consensus.clusters import Buckets, Tally, numeric_merges, symbolic_pairs, tally
from verifiers.kinds.consensus.reading import SET, Unreadable, Vote, read_vote
from verifiers.kinds.math.verifier import MathOptions, MathVerifier
from verifiers.types import Status, UnknownVerifier, Verdict, VerifyItem


class WeightBy(BaseModel):
    """A verifier whose score on each response weighs its vote (a PRM/ORM, a judge, any scored verifier)."""

    model_config = ConfigDict(extra="forbid")

    verifier: str = Field(..., min_length=1, description="Registered verifier name, e.g. 'prm' or 'orm'.")
    options: dict[str, Any] = Field(default_factory=dict, description="That verifier's options.")
    reference: Any = Field(None, description="What that verifier gets as reference (prm/orm: the prompt).")


class ConsensusOptions(MathOptions):
    threshold: float = Field(
        0.5, ge=0.0, lt=1.0,
        description="The heaviest answer cluster must hold MORE than this share of the group's vote weight, and more "
        "than any other cluster. 0.5 is a strict majority: a tie or a plurality never passes, and no other cluster "
        "can. 0 is the plurality rule (TTRL's majority vote): the most frequent answer wins, a tie at the top "
        "abstains.",
    )
    min_size: int = Field(
        3, ge=1, le=100_000, description="Fewest readable answers (votes) a group needs to be scored by consensus.",
    )
    weight: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="This item's vote weight (multiplies a weight_by score).",
    )
    weight_by: WeightBy | None = Field(None, description="Weigh each vote by this verifier's score (clipped at 0).")
    choice_letters: bool = Field(False, description="Read a bare choice letter (A-J) when nothing else is stated.")
    max_pairs: int = Field(
        256, ge=0, le=10_000, description="Symbolic equivalence checks per group, between cluster representatives.",
    )


    @model_validator(mode="after")
    def _no_postprocess(self) -> ConsensusOptions:
        if self.correction != "none" or self.appeal is not None or self.noise_rates is not None:
            raise ValueError("consensus rewards take no noise correction or appeal (there is no reference to audit)")
        if self.weight_by is not None and self.weight_by.verifier == "consensus":
            raise ValueError("weight_by cannot be consensus itself")
        return self


# Options that decide a group's outcome: every item of one group must give the same values.
_GROUP_OPTIONS = ("threshold", "min_size", "rel_tol", "max_pairs")


@dataclass
class _Group:
    positions: list[int]  # indexes into the request's consensus items
    voters: list[int] = field(default_factory=list)  # positions that cast a vote
    votes: list[Vote] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    failure: Verdict | None = None  # the group cannot be scored (inconsistent options, weights unavailable)
    buckets: Buckets | None = None
    pairs: list[tuple[int, int]] = field(default_factory=list)
    equal: list[tuple[int, int]] = field(default_factory=list)


def _signature(options: ConsensusOptions) -> tuple[Any, ...]:
    wb = options.weight_by
    return (*(getattr(options, k) for k in _GROUP_OPTIONS), wb.verifier if wb else None)


def _boxed(text: str) -> str:
    return f"\\boxed{{{text}}}"


class ConsensusVerifier(Verifier[ConsensusOptions]):
    name = "consensus"
    version = "2"
    description = (
        "Label-free reward over a GRPO group (items sharing 'group'): answers read by the math core, clustered by "
        "equivalence; members of a clear majority score 1, other answers 0; no clear majority or too few readable "
        "answers is a null score (no_consensus / group_too_small). Votes can be weighted (weight, weight_by: "
        "prm/orm/any verifier). Items with a reference are scored against it as the math verifier does."
    )
    Options = ConsensusOptions
    group_level = True
    _math = MathVerifier()

    def validate(self, options: ConsensusOptions, lookup: VerifierLookup) -> None:
        wb = options.weight_by
        if wb is not None:
            weigher = lookup.get(wb.verifier)  # UnknownVerifier: a 422 naming it
            weigher.validate(weigher.parse_options(wb.options), lookup)

    def check(self, response: str, reference: Any, options: ConsensusOptions) -> Verdict:
        vote = read_vote(response, tail_chars=options.tail_chars, last_number=options.last_number_fallback,
                         choice_letters=options.choice_letters, rel_tol=options.rel_tol)
        if reference is not None:  # semi-supervised: a labelled item is scored against its label, and still votes
            verdict = self._math.check(response, reference, options)
            verdict.details["reward_source"] = "reference"
        elif isinstance(vote, Unreadable):
            build = Verdict.rejected if vote.hedged else Verdict.no_answer
            verdict = build(vote.reason, reward_source="consensus")
            if vote.extracted is not None:
                verdict.details["extracted"] = vote.extracted
        else:
            verdict = Verdict(Status.GROUP_TOO_SMALL, None, "scored alone: a consensus needs the other responses of "
                              "its group in the same request", {"reward_source": "consensus"})
        verdict.details["vote"] = vote.to_dict() if isinstance(vote, Vote) else None
        return verdict

    async def finish_group(self, ctx: Context, items: list[Prepared], verdicts: list[Verdict]) -> list[Verdict]:
        groups = self._groups(items, verdicts)
        await self._weigh(ctx, items, groups)
        for g in groups:
            if g.failure is None:
                g.buckets = Buckets.of(g.votes, g.weights)
                opts = _options(items[g.positions[0]])
                g.equal = numeric_merges(g.buckets, opts.rel_tol)
                g.pairs = symbolic_pairs(g.buckets, opts.max_pairs)
        await self._symbolic(ctx, items, groups)
        out = list(verdicts)
        for g in groups:
            for pos, verdict in zip(g.positions, self._decide(g, items, verdicts)):
                out[pos] = verdict
        return out

    @staticmethod
    def _groups(items: list[Prepared], verdicts: list[Verdict]) -> list[_Group]:
        by_id: dict[Any, _Group] = {}
        for pos, p in enumerate(items):
            key = p.item.group if p.item.group is not None else ("__alone__", pos)
            by_id.setdefault(key, _Group([])).positions.append(pos)
        groups = list(by_id.values())
        for g in groups:
            signatures = {_signature(_options(items[pos])) for pos in g.positions}
            if len(signatures) > 1:
                g.failure = Verdict.error(
                    f"the items of group {items[g.positions[0]].item.group!r} disagree on "
                    f"{', '.join(_GROUP_OPTIONS)} or weight_by.verifier; a group is decided by one rule")
                continue
            for pos in g.positions:
                raw = verdicts[pos].details.get("vote")
                if raw:
                    g.voters.append(pos)
                    g.votes.append(Vote.from_dict(raw))
                    g.weights.append(1.0)
        return groups

    @staticmethod
    async def _weigh(ctx: Context, items: list[Prepared], groups: list[_Group]) -> None:
        """Vote weights: the item's ``weight`` times the ``weight_by`` verifier's score (all items in one batch).
        A weight that cannot be had (model down, timeout) leaves the whole group unscored with that status."""
        jobs: list[tuple[_Group, int, VerifyItem]] = []
        for g in groups:
            if g.failure is not None:
                continue
            for k, pos in enumerate(g.voters):
                opts = _options(items[pos])
                if opts.weight is not None:
                    g.weights[k] = opts.weight
                if opts.weight_by is not None:
                    wb = opts.weight_by
                    jobs.append((g, k, VerifyItem(
                        wb.verifier, items[pos].item.response, wb.reference, wb.options,
                        messages=items[pos].item.messages, tools=items[pos].item.tools)))
        if not jobs:
            return
        scored = await ctx.verify_many([item for _, _, item in jobs])  # nested: not reported
        for (g, k, _), verdict in zip(jobs, scored):
            if g.failure is not None:
                continue
            if verdict.score is None or not math.isfinite(verdict.score):
                g.failure = Verdict(verdict.status if verdict.score is None else Status.ERROR, None,
                                    f"vote weight unavailable ({verdict.status.value}: {verdict.reason[:200]})")
            else:
                g.weights[k] *= max(0.0, verdict.score)

    @staticmethod
    async def _symbolic(ctx: Context, items: list[Prepared], groups: list[_Group]) -> None:
        """Every group's pending representative pairs through the ``math`` verifier, as one batch."""
        jobs: list[tuple[_Group, tuple[int, int], VerifyItem]] = []
        for g in groups:
            if g.buckets is None:
                continue
            opts = _options(items[g.positions[0]])
            wire: dict[str, Any] = {"rel_tol": opts.rel_tol, "last_number_fallback": False}
            if opts.timeout_s is not None:
                wire["timeout_s"] = opts.timeout_s
            for a, b in g.pairs:
                gold, answer = g.buckets.rep(a), g.buckets.rep(b)
                jobs.append((g, (a, b), VerifyItem("math", _boxed(answer.value), gold.value, dict(wire))))
        if not jobs:
            return
        try:
            verdicts = await ctx.verify_many([item for _, _, item in jobs])
        except UnknownVerifier:  # a registry without ``math``: buckets stay apart (abstains more, never misleads)
            return
        for (g, pair, _), verdict in zip(jobs, verdicts):
            if verdict.score == 1.0:
                g.equal.append(pair)

    def _decide(self, g: _Group, items: list[Prepared], verdicts: list[Verdict]) -> list[Verdict]:
        if g.failure is not None:  # labelled items keep their reference verdict
            return [self._final(verdicts[pos], None if _labelled(items[pos]) else _copy(g.failure),
                                {"reward_source": _source(items[pos])}) for pos in g.positions]
        assert g.buckets is not None
        t = tally(g.buckets, g.equal)
        opts = _options(items[g.positions[0]])
        summary = _summary(t, len(g.positions), weighted=any(
            _options(items[p]).weight is not None or _options(items[p]).weight_by is not None
            for p in g.positions))
        if len(g.votes) < opts.min_size:
            outcome = Verdict(Status.GROUP_TOO_SMALL, None,
                              f"{len(g.votes)} readable answer(s) of {len(g.positions)} response(s), fewer than "
                              f"min_size={opts.min_size}: not scored by consensus")
        elif t.tied():
            outcome = Verdict(Status.NO_CONSENSUS, None,
                              f"a tie at the top: the largest clusters each hold {t.share:.0%} of the vote")
        elif t.share <= opts.threshold:
            outcome = Verdict(Status.NO_CONSENSUS, None,
                              f"no answer holds a clear majority: the largest cluster holds {t.share:.0%} of the "
                              f"vote, not more than threshold={opts.threshold:g}")
        elif t.representatives[0].kind == SET and t.share <= 0.5:
            # Several answers are one set answer only when most of the group states that set; a plurality of the
            # same hedge ("4 or 5" twice beside a 4 and a 5) elects nothing.
            outcome = Verdict(Status.NO_CONSENSUS, None,
                              f"the largest cluster is a set of several answers holding {t.share:.0%} of the vote, "
                              "not a majority")
        else:
            outcome = None
            summary["pseudo_label"] = t.representatives[0].answer
        members = set(t.clusters[0]) if outcome is None else set()
        out = []
        for pos in g.positions:
            verdict = verdicts[pos]
            vote_at = g.voters.index(pos) if pos in g.voters else None
            own: dict[str, Any] = {"reward_source": _source(items[pos])}
            if vote_at is not None:
                own["answer"] = g.votes[vote_at].answer
            if vote_at is not None and summary["weighted"]:
                own["weight"] = g.weights[vote_at]
            if _labelled(items[pos]) or vote_at is None:
                out.append(self._final(verdict, None, {**summary, **own}))  # reference-scored, refused or failed
            elif outcome is not None:
                out.append(self._final(verdict, _copy(outcome), {**summary, **own}))
            elif vote_at in members:
                out.append(self._final(verdict, Verdict.ok(1.0, "agrees with the group's majority answer"),
                                       {**summary, **own}))
            elif (several := g.votes[vote_at].several) and t.representatives[0].kind != SET:  # hedging, as math says
                out.append(self._final(verdict, Verdict.rejected(several, method="hedging"),
                                       {**summary, **own}))
            else:
                out.append(self._final(verdict, Verdict.ok(0.0, "differs from the group's majority answer"),
                                       {**summary, **own}))
        return out

    @staticmethod
    def _final(per_item: Verdict, replacement: Verdict | None, extra: dict[str, Any]) -> Verdict:
        """The item's final verdict: ``replacement`` (or the per-item one) with the group's figures in details."""
        base = replacement if replacement is not None else per_item
        details = {k: v for k, v in per_item.details.items() if k != "vote"}
        details.update(base.details if replacement is not None else {})
        details.update(extra)
        return Verdict(base.status, base.score, base.reason, details, per_item.elapsed_ms)


def _options(p: Prepared) -> ConsensusOptions:
    """A consensus item's options (the engine parsed them with ``ConsensusVerifier.Options``)."""
    return cast(ConsensusOptions, p.options)


def _labelled(p: Prepared) -> bool:
    return p.item.reference is not None


def _source(p: Prepared) -> str:
    """What decided the item's score: its own reference, or the group's consensus."""
    return "reference" if _labelled(p) else "consensus"


def _copy(v: Verdict) -> Verdict:
    return Verdict(v.status, v.score, v.reason, dict(v.details))


def _summary(t: Tally, group_size: int, *, weighted: bool) -> dict[str, Any]:
    """What a trainer filters groups on: the same for every item of the group."""
    return {
        "pseudo_label": None,
        "top_answer": t.representatives[0].answer if t.representatives else None,
        "share": round(t.share, 6),
        "clusters": len(t.clusters),
        "entropy": round(t.entropy, 6),
        "votes": sum(len(c) for c in t.clusters),
        "group_size": group_size,
        "weighted": weighted,
    }


VERIFIERS: list[Verifier[Any]] = [ConsensusVerifier()]
