"""Label-free consensus rewards against true labels, beside exact-string majority voting; and their throughput.

Data: ``../shared/data/math/processbench_answers.jsonl`` (3,397 responses of 12 open models, each labelled with
whether its final answer is right). Groups: all responses to one problem (ProcessBench has 2-5 for 430 problems;
no other file in shared/data holds several model outputs per prompt). Problems are split in two halves by a hash
of their text: ``dev`` (used to look at thresholds) and ``held-out`` (the figures that count); ``--sweep`` prints
the threshold x min_size grid on dev.

Methods, each giving every response a reward in {1, 0, null}:
- ``consensus``: this service's ``consensus`` verifier (engine + worker pool, the server's path).
- ``exact-majority``: the common hand-written baseline: the last ``\\boxed{}`` (else the last number) as a string,
  ``Counter.most_common(1)`` over the responses that have one (ties go to the first seen); the majority's
  responses score 1, all others 0. Never abstains.
- ``exact-majority+abstain``: the same strings with consensus's own abstention rule (strict majority, min_size), so
  the difference to ``consensus`` is the answer reading and equivalence alone.
Per method: share of responses scored (non-null reward), agreement (reward == label) among the scored ones, and
right rewards over all responses. Hedged check: responses the ``math`` verifier rejects as hedging against their
reference, and how many of them consensus scored 1 (must be 0).

Throughput: 64 groups of 16 responses (1,024 distinct responses; each group holds 16 different problems, so
answers rarely agree and the group pass has the most clusters and symbolic pairs to check: the slow case) scored
by ``consensus`` vs the same responses scored by ``math`` against their references, same engine and pool,
alternating runs, median of ``--repeats``; also 64 same-problem groups (each problem's 2-5 responses repeated to 16).

Run: python benchmarks/consensus_quality.py [--workers 2] [--repeats 3] [--sweep]
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA
from verifiers.engine import Engine
from verifiers.engine.pool import WorkerPool
from verifiers.engine.registry import load_modules
from verifiers.kinds.math.extract import boxed_contents
from verifiers.types import VerifyItem

DATA = SHARED_DATA / "math" / "processbench_answers.jsonl"
MODULES = ["verifiers.kinds.math.verifier", "verifiers.kinds.consensus"]
_LAST_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def load_groups(path: Path = DATA) -> dict[str, list[dict[str, Any]]]:
    """Responses by problem, only problems with two or more."""
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            by_problem[row["problem"]].append(row)
    return {p: rows for p, rows in by_problem.items() if len(rows) >= 2}


def half(problem: str) -> str:
    return "dev" if hashlib.blake2b(problem.encode(), digest_size=2).digest()[0] % 2 == 0 else "held-out"


def exact_answer(response: str) -> str | None:
    """The hand-written reading: last boxed content, else the last number, as a string."""
    boxes = boxed_contents(response)
    if boxes:
        return boxes[-1].strip()
    numbers = _LAST_NUMBER.findall(response.replace(",", ""))
    return numbers[-1] if numbers else None


def exact_majority(responses: list[str], *, abstain: bool, threshold: float = 0.5,
                   min_size: int = 3) -> list[float | None]:
    """Exact-string voting. With ``abstain``, consensus's rule: at least ``min_size`` votes, the top answer above
    ``threshold`` of them and ahead of the second (``threshold=0, min_size=1`` is plurality voting, ties abstain)."""
    answers = [exact_answer(r) for r in responses]
    votes = Counter(a for a in answers if a is not None)
    if not votes:
        return [0.0] * len(responses)
    ranked = votes.most_common(2)
    top, count = ranked[0]
    tied = len(ranked) > 1 and ranked[1][1] == count
    if abstain and (sum(votes.values()) < min_size or count / sum(votes.values()) <= threshold or tied):
        return [None if a is not None else 0.0 for a in answers]
    return [1.0 if a == top else 0.0 for a in answers]


PLURALITY = {"threshold": 0.0, "min_size": 1}


def styled_groups(seed: int = 7) -> list[list[dict[str, Any]]]:
    """Groups of 6 to 12 responses per problem (GSM8K, MATH-500, AIME 2024, AMC 2023 golds), written the ways models
    write (``math_heldout``'s closing styles, prices, chat-template tails, hedges, answerless ones): in each group
    a share of responses state the gold in one of its spellings, the others one of two or three wrong values (wrong
    answers agree with each other, as a model's do). Labels: 1 for the gold's value. ``reference`` holds the gold."""
    from benchmarks import math_heldout as mh

    rng = random.Random(seed)
    golds: list[str] = []
    golds += [r["answer"].rsplit("####", 1)[1].strip().replace(",", "") for r in mh._load("gsm8k.test.jsonl")[:150]]
    golds += [r["answer"] for r in mh._load("math500.test.jsonl")
              if re.fullmatch(r"-?\d+|-?\\frac\{\d+\}\{\d+\}|-?\d+\.\d+", r["answer"])][:150]
    golds += [str(int(float(r["answer"]))) for name in ("aime24.test.jsonl", "amc23.test.jsonl")
              for r in mh._load(name)]
    groups = []
    for gold in golds:
        spellings = [gold, *_spellings(gold)]
        wrong = sorted({mh._wrong_number(_plain(gold), rng) for _ in range(3)} - {_plain(gold)})
        right_share = rng.choice([0.2, 0.35, 0.5, 0.65, 0.8])
        rows = []
        for _ in range(rng.randint(6, 12)):
            roll = rng.random()
            if roll < 0.08:
                rows.append({"response": "I am not sure how to solve this problem.", "label": 0, "reference": gold})
                continue
            if roll < 0.14:
                _, text = mh.hedge(rng.choice(spellings), rng.choice(wrong), rng)
                rows.append({"response": text, "label": 0, "reference": gold})
                continue
            label = int(rng.random() < right_share)
            value = rng.choice(spellings) if label else rng.choice(wrong)
            _, text = mh.closing(value, rng)
            tail = rng.choice(mh.CHAT_TAILS) if rng.random() < 0.25 else ""
            rows.append({"response": f"Let me work through it step by step.\n\n{text}{tail}", "label": label,
                         "reference": gold})
        groups.append(rows)
    return groups


def _plain(gold: str) -> str:
    """A gold as a plain decimal number (for drawing wrong values near it)."""
    m = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", gold)
    return f"{m.group(1)}{int(m.group(2)) / int(m.group(3)):g}" if m else gold


def _spellings(gold: str) -> list[str]:
    """Other ways models write the gold: a fraction as a/b or a decimal, an integer with a thousands separator or
    ``.0``, a price."""
    m = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", gold)
    if m:
        sign, a, b = m.groups()
        out = [f"{sign}{a}/{b}", f"{sign}\\dfrac{{{a}}}{{{b}}}"]
        value = int(a) / int(b)
        if len(f"{value:g}") <= 6:
            out.append(f"{sign}{value:g}")
        return out
    if re.fullmatch(r"-?\d+", gold):
        n = int(gold)
        return [f"{n:,}" if abs(n) >= 1000 else f"{n}.0", f"\\${n}", f"{n}.00"]
    return [gold + "0"] if "." in gold else []


async def consensus_rewards(engine: Engine, groups: list[list[dict[str, Any]]],
                            options: dict[str, Any]) -> list[list[dict[str, Any]]]:
    items = [VerifyItem("consensus", r["response"], None, dict(options), group=str(g))
             for g, rows in enumerate(groups) for r in rows]
    verdicts = iter(await engine.verify_many(items))
    return [[next(verdicts).to_dict() for _ in rows] for rows in groups]


def score(rewards: list[float | None], labels: list[int]) -> dict[str, float]:
    scored = [(r, y) for r, y in zip(rewards, labels) if r is not None]
    right = sum(1 for r, y in scored if r == y)
    n = len(labels)
    return {"n": n, "scored": len(scored) / n, "agreement": right / len(scored) if scored else 0.0,
            "right_of_all": right / n}


def paired(ours: list[float | None], base: list[float | None], labels: list[int], name: str) -> None:
    """Sample by sample against one baseline: where both score, where only one does, and how often each agrees there.

    Coverage and agreement trade off (abstaining more raises agreement), so the comparison that settles "more
    right, on at least as many samples" is on the same samples: on every sample the baseline scores, does consensus
    score it too, and agree at least as often; and what do the samples only one side scores add.
    """
    cells: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for o, b, y in zip(ours, base, labels):
        key = "both" if o is not None and b is not None else "consensus only" if o is not None else \
            "baseline only" if b is not None else "neither"
        cells[key].append((o == y, b == y))
    print(f"  paired with {name}:")
    for key in ("both", "consensus only", "baseline only"):
        pairs = cells.get(key, [])
        if not pairs:
            print(f"    {key:<15} 0 samples")
            continue
        o_right, b_right = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
        text = {"both": f"consensus right {o_right} ({o_right / len(pairs):.1%}), baseline right {b_right} "
                        f"({b_right / len(pairs):.1%})",
                "consensus only": f"consensus right {o_right} ({o_right / len(pairs):.1%})",
                "baseline only": f"baseline right {b_right} ({b_right / len(pairs):.1%})"}[key]
        print(f"    {key:<15} {len(pairs):>4} samples: {text}")


def row(name: str, m: dict[str, float]) -> str:
    return (f"  {name:<24} scored {m['scored']:6.1%}  agreement {m['agreement']:6.1%}  "
            f"right of all {m['right_of_all']:6.1%}")


async def quality(engine: Engine, groups: dict[str, list[dict[str, Any]]], sweep: bool) -> None:
    for part in ("dev", "held-out"):
        chosen = [rows for p, rows in groups.items() if half(p) == part]
        labels = [r["label"] for rows in chosen for r in rows]
        sizes = Counter(len(rows) for rows in chosen)
        print(f"{part}: {len(chosen)} groups, {len(labels)} responses, sizes {dict(sorted(sizes.items()))}, "
              f"{sum(labels) / len(labels):.1%} labelled right")
        verdicts = await consensus_rewards(engine, chosen, {})
        ours = [v["score"] for vs in verdicts for v in vs]
        print(row("consensus (defaults)", score(ours, labels)))
        baselines = {}
        for name, abstain in (("exact-majority", False), ("exact-majority+abstain", True)):
            base = [s for rows in chosen for s in exact_majority([r["response"] for r in rows], abstain=abstain)]
            baselines[name] = base
            print(row(name, score(base, labels)))
        for name, base in baselines.items():
            paired(ours, base, labels, name)
        statuses = Counter(v["status"] for vs in verdicts for v in vs)
        print(f"  consensus statuses: {dict(statuses.most_common())}")
        if sweep and part == "dev":
            for min_size in (2, 3):
                for threshold in (0.5, 0.6, 0.7):
                    vs = await consensus_rewards(engine, chosen, {"threshold": threshold, "min_size": min_size})
                    m = score([v["score"] for g in vs for v in g], labels)
                    print(row(f"  min_size={min_size} t={threshold}", m))
                for name, abstain in (("  exact+abstain", True),):
                    base = [s for rows in chosen for s in exact_majority(
                        [r["response"] for r in rows], abstain=abstain, min_size=min_size)]
                    print(row(f"{name} min_size={min_size}", score(base, labels)))
        await hedged_check(engine, chosen, verdicts)


Groups = list[list[dict[str, Any]]]


async def plurality(engine: Engine, name: str, groups: list[list[dict[str, Any]]]) -> None:
    """The two rules side by side on one set of groups: consensus's default (strict majority, min_size 3) and
    plurality (``threshold: 0, min_size: 1``), against exact-string voting under the same rules."""
    labels = [r["label"] for rows in groups for r in rows]
    print(f"{name}: {len(groups)} groups, {len(labels)} responses, {sum(labels) / len(labels):.1%} labelled right")
    results = {}
    for rule, options in (("majority", {}), ("plurality", PLURALITY)):
        verdicts = await consensus_rewards(engine, groups, options)
        ours = [v["score"] for vs in verdicts for v in vs]
        threshold, min_size = options.get("threshold", 0.5), options.get("min_size", 3)
        base = [s for rows in groups for s in exact_majority([r["response"] for r in rows], abstain=True,
                                                             threshold=threshold, min_size=min_size)]
        results[rule] = (ours, base)
        for who, rewards in (("consensus", ours), ("exact-string", base)):
            m = score(rewards, labels)
            right = round(m["right_of_all"] * m["n"])
            print(f"  {rule:<10} {who:<13} scored {round(m['scored'] * m['n']):>5} ({m['scored']:6.1%})  "
                  f"agreement {m['agreement']:6.1%}  right {right:>5} ({m['right_of_all']:6.1%})")
    paired(*results["plurality"], labels, "exact-string plurality")


async def hedged_check(engine: Engine, groups: Groups, verdicts: Groups) -> None:
    rows = [r for g in groups for r in g]
    flat = [v for vs in verdicts for v in vs]
    math = await engine.verify_many([VerifyItem("math", r["response"], r["reference"]) for r in rows])
    hedged = [i for i, v in enumerate(math) if v.status.value == "rejected"]
    rewarded = [i for i in hedged if flat[i]["score"] == 1.0]
    refused = sum(1 for v in flat if v["status"] == "rejected")
    print(f"  hedged/refused: math rejects {len(hedged)} against the reference, consensus scored {len(rewarded)} "
          f"of them 1; consensus itself refused {refused}")


def throughput_groups(groups: dict[str, list[dict[str, Any]]], all_rows: list[dict[str, Any]]) -> dict[str, Groups]:
    mixed = [all_rows[g * 16:(g + 1) * 16] for g in range(64)]
    largest = sorted(groups.values(), key=len, reverse=True)[:64]
    same = [[rows[k % len(rows)] for k in range(16)] for rows in largest]
    return {"mixed-problem groups": mixed, "same-problem groups": same}


async def timed(engine: Engine, items: list[VerifyItem]) -> float:
    started = time.perf_counter()
    await engine.verify_many(items)
    return time.perf_counter() - started


async def throughput(engine: Engine, sets: dict[str, list[list[dict[str, Any]]]], repeats: int) -> None:
    for name, groups in sets.items():
        rows = [r for g in groups for r in g]
        cons = [VerifyItem("consensus", r["response"], None, {}, group=str(g))
                for g, rs in enumerate(groups) for r in rs]
        ref = [VerifyItem("math", r["response"], r["reference"]) for r in rows]
        await timed(engine, cons[:64])
        t_cons, t_ref = [], []
        for _ in range(repeats):
            t_ref.append(await timed(engine, ref))
            t_cons.append(await timed(engine, cons))
        c, r = statistics.median(t_cons), statistics.median(t_ref)
        print(f"{name}: 64 x 16 = {len(rows)} responses: consensus {c:.2f} s ({len(rows) / c:.0f}/s), "
              f"math against references {r:.2f} s ({len(rows) / r:.0f}/s), ratio {c / r:.2f}x")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sweep", action="store_true", help="threshold x min_size grid on the dev half")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()
    if not DATA.exists():
        print(f"skipped: {DATA} not found")
        return
    pool = WorkerPool(args.workers, MODULES)
    await pool.start()
    try:
        engine = Engine(load_modules(MODULES), pool=pool, default_timeout_s=10.0)
        groups = load_groups()
        await quality(engine, groups, args.sweep)
        halves = {part: [rows for p, rows in groups.items() if half(p) == part] for part in ("dev", "held-out")}
        for part, chosen in halves.items():
            await plurality(engine, f"ProcessBench {part}", chosen)
        await plurality(engine, "ProcessBench, both halves", [*halves["dev"], *halves["held-out"]])
        await plurality(engine, "styled groups (math_heldout styles)", styled_groups())
        if not args.skip_throughput:
            all_rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
            await throughput(engine, throughput_groups(groups, all_rows), args.repeats)
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main())
