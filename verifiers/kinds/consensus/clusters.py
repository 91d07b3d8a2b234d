"""Clustering one group's votes by answer equivalence, cheapest test first.

1. Bucket by key (``reading.bucket``): all spellings of one number, one word, one canonical form share a bucket.
2. Number buckets are merged when ``numbers_equal`` says so (a decimal against 1/3 within ``rel_tol``): exact
   fractions, no parsing, so this runs anywhere.
3. Only bucket *representatives* involving a non-numeric expression go to a symbolic check (the ``math``
   verifier, in the worker pool under its deadline), heaviest pairs first, at most ``max_pairs`` per group.
Equal pairs are joined transitively (union-find). A check that is skipped, fails or times out leaves two buckets
apart, which can only lower the top cluster's share: with a threshold of at least one half, an incomplete merge can
make a group abstain but can never elect a different answer (two clusters cannot both hold over half the votes).
Under the plurality rule (a threshold below one half) a missed merge can elect another answer; pairs are checked
heaviest first, so the largest clusters are settled before ``max_pairs`` runs out.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from verifiers.kinds.consensus.reading import EXPR, NUMBER, SET, TEXT, Vote
from verifiers.kinds.math.normalize import canonical, equation_sides
from verifiers.kinds.math.numeric import numbers_equal, parse_number


@dataclass
class Buckets:
    """The votes of one group split by key; ``members[b]`` are vote indexes, ``weight[b]`` their summed weight."""

    votes: list[Vote]
    members: list[list[int]]
    weight: list[float]

    @classmethod
    def of(cls, votes: list[Vote], weights: list[float]) -> Buckets:
        index: dict[str, int] = {}
        members: list[list[int]] = []
        weight: list[float] = []
        for i, (vote, w) in enumerate(zip(votes, weights)):
            b = index.setdefault(vote.key, len(members))
            if b == len(members):
                members.append([])
                weight.append(0.0)
            members[b].append(i)
            weight[b] += w
        return cls(votes, members, weight)

    def rep(self, b: int) -> Vote:
        return self.votes[self.members[b][0]]

    def __len__(self) -> int:
        return len(self.members)


def _comparable(a: Vote, b: Vote) -> bool:
    """Text, letters and sets match by key only; other kinds only under the same condition."""
    return not {a.kind, b.kind} & {TEXT, SET} and (a.condition or "") == (b.condition or "")


def numeric_merges(buckets: Buckets, rel_tol: float) -> list[tuple[int, int]]:
    """Pairs of number buckets that are one value (keys differ only for a decimal written against e.g. 1/3)."""
    numbers = [(b, parse_number(buckets.rep(b).value)) for b in range(len(buckets)) if buckets.rep(b).kind == NUMBER]
    return [
        (a, b) for i, (a, x) in enumerate(numbers) for b, y in numbers[i + 1:]
        if x is not None and y is not None and (x.decimal or y.decimal) and _comparable(buckets.rep(a), buckets.rep(b))
        and numbers_equal(x, y, rel_tol)
    ]


_COMMAND = re.compile(r"\\[A-Za-z]+")


def _letters(vote: Vote) -> frozenset[str]:
    """The letters an answer uses outside LaTeX commands (its unknowns and constants: n, x, e, i)."""
    return frozenset(re.findall(r"[A-Za-z]", _COMMAND.sub("", canonical(vote.value))))


def _apart(a: Vote, b: Vote) -> bool:
    """One number against a compound answer, or both probes present and clearly different (far beyond
    ``rel_tol``): the answers cannot be equal."""
    if (a.kind == NUMBER and b.compound) or (b.kind == NUMBER and a.compound):
        return True
    if a.probe is None or b.probe is None:
        return False
    scale = max(abs(complex(*a.probe)), abs(complex(*b.probe)), 1e-9)
    return abs(complex(*a.probe) - complex(*b.probe)) > 1e-3 * scale


def symbolic_pairs(buckets: Buckets, max_pairs: int) -> list[tuple[int, int]]:
    """(gold, answer) bucket pairs that need the symbolic check, heaviest first, at most ``max_pairs``. Answers in
    different letters ("n - 2" and "5", "x^2" and "n^2") are left apart unchecked, unless one is a statement
    ("\\text{Total} = 40"). The gold side is the one that is
    not an equation ("5" against "AB = 5" reads the statement's value), else the heavier."""
    letters = [None if "=" in buckets.rep(b).value else _letters(buckets.rep(b)) for b in range(len(buckets))]
    pairs = []
    for a in range(len(buckets)):
        for b in range(a + 1, len(buckets)):
            ra, rb = buckets.rep(a), buckets.rep(b)
            if EXPR in (ra.kind, rb.kind) and _comparable(ra, rb) and not _apart(ra, rb) and (
                    None in (letters[a], letters[b]) or letters[a] == letters[b]):
                pairs.append((a, b))
    pairs.sort(key=lambda p: -(buckets.weight[p[0]] + buckets.weight[p[1]]))
    out = []
    for a, b in pairs[:max_pairs]:
        heavier, lighter = (a, b) if buckets.weight[a] >= buckets.weight[b] else (b, a)
        if (equation_sides(buckets.rep(heavier).value) is not None
                and equation_sides(buckets.rep(lighter).value) is None):
            heavier, lighter = lighter, heavier
        out.append((heavier, lighter))
    return out


@dataclass
class Tally:
    """Clusters of one group, heaviest first: ``clusters[c]`` are vote indexes."""

    clusters: list[list[int]]
    weights: list[float]
    representatives: list[Vote]

    @property
    def total(self) -> float:
        return math.fsum(self.weights)

    @property
    def share(self) -> float:
        """The top cluster's share of the vote weight (0 when nobody voted or every weight is 0)."""
        total = self.total
        return self.weights[0] / total if self.weights and total > 0 else 0.0

    @property
    def entropy(self) -> float:
        """Shannon entropy (nats) of the answer distribution over clusters: 0 when all agree."""
        total = self.total
        if total <= 0:
            return 0.0
        return max(0.0, -math.fsum(w / total * math.log(w / total) for w in self.weights if w > 0))

    def tied(self) -> bool:
        return len(self.weights) > 1 and self.weights[1] >= self.weights[0]


def tally(buckets: Buckets, equal_pairs: list[tuple[int, int]]) -> Tally:
    """Join equal buckets transitively; each cluster is shown by the first vote of its heaviest bucket."""
    parent = list(range(len(buckets)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in equal_pairs:
        parent[find(a)] = find(b)
    roots: dict[int, list[int]] = {}
    for b in range(len(buckets)):
        roots.setdefault(find(b), []).append(b)
    groups = sorted(roots.values(), key=lambda bs: (-math.fsum(buckets.weight[b] for b in bs), min(bs)))
    return Tally(
        clusters=[sorted(i for b in bs for i in buckets.members[b]) for bs in groups],
        weights=[math.fsum(buckets.weight[b] for b in bs) for bs in groups],
        representatives=[buckets.rep(max(bs, key=lambda b: (buckets.weight[b], -b))) for bs in groups],
    )
