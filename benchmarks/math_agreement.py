"""The ``math`` verifier and Math-Verify side by side on real, labelled model outputs.

Data: ``../shared/data/math/processbench_answers.jsonl`` (3,397 responses of 12 open models to GSM8K, MATH,
OlympiadBench and Omni-MATH problems, each with a reference answer and ProcessBench's label of whether its final
answer is right). Prints false positives (scored 1, label wrong) and false negatives (not scored 1, label right) of
each verifier, per source and in total, then the wall time of each over the whole file on ``--workers`` processes:
ours through ``verifiers.engine.pool.WorkerPool`` (the service's own path, with its per-item deadline), Math-Verify's
``parse`` + ``verify`` with its defaults through a ``multiprocessing.Pool`` of the same size. Both sides are warmed
on a few rows first (imports, parser start-up). ``--out FILE`` writes one JSON row per item where the two verifiers
or a verifier and the label disagree.

Run: python benchmarks/math_agreement.py [--workers N] [--out disagreements.jsonl]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA

DATA = SHARED_DATA / "math" / "processbench_answers.jsonl"
SOURCES = ("gsm8k", "math", "olympiadbench", "omnimath")


def load_rows(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def mv_row(pair: tuple[str, str]) -> tuple[bool, str]:
    """Math-Verify with its defaults (its own 5 s ``signal.alarm`` timeouts: each pool process runs tasks on its main
    thread), as its README shows it: the gold in ``$...$``, the response as written."""
    from math_verify import parse, verify

    response, reference = pair
    gold = parse(f"${reference}$")
    pred = parse(response)
    return bool(verify(gold, pred)), str(pred[1] if len(pred) > 1 else pred[:1])[:200]


async def ours_all(rows: list[dict[str, Any]], workers: int, timeout_s: float) -> tuple[list[dict[str, Any]], float]:
    from verifiers.engine.pool import WorkerPool

    pool = WorkerPool(workers, ["verifiers.kinds.math.verifier"])
    await pool.start()
    try:
        await asyncio.gather(*(pool.run("math", r["response"], r["reference"], {}, timeout_s) for r in rows[:20]))
        # A bounded window in flight: deadlines count from queueing, so queueing all 3,397 rows at once
        # would time out the back of the queue whenever the machine is busier than usual.
        window = asyncio.Semaphore(workers * 64)

        async def one(row: dict[str, Any]) -> Any:
            async with window:
                return await pool.run("math", row["response"], row["reference"], {}, timeout_s)

        started = time.perf_counter()
        verdicts = await asyncio.gather(*(one(r) for r in rows))
        elapsed = time.perf_counter() - started
    finally:
        await pool.close()
    return [{"score": v.score, "status": v.status.value, "reason": v.reason[:200],
             "extracted": v.details.get("extracted"), "extraction": v.details.get("extraction")}
            for v in verdicts], elapsed


def mv_all(rows: list[dict[str, Any]], workers: int) -> tuple[list[tuple[bool, str]], float]:
    pairs = [(r["response"], r["reference"]) for r in rows]
    with multiprocessing.get_context("spawn").Pool(workers) as mp:
        mp.map(mv_row, pairs[:20], chunksize=1)
        started = time.perf_counter()
        out = mp.map(mv_row, pairs, chunksize=4)
        return out, time.perf_counter() - started


def confusion(says: list[bool], rows: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for ok, row in zip(says, rows):
        if ok and not row["label"]:
            fp[row["source"]] += 1
        if not ok and row["label"]:
            fn[row["source"]] += 1
    return {"fp": fp, "fn": fn}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--timeout", type=float, default=10.0, help="Our per-item deadline (the service default).")
    parser.add_argument("--out", type=Path, help="Write the disagreement rows here (JSON lines).")
    parser.add_argument("--limit", type=int, default=0, help="Only the first N rows (a quick look).")
    args = parser.parse_args()
    if not DATA.exists():
        print(f"skipped: {DATA} is absent")
        return
    rows = load_rows()
    if args.limit:
        rows = rows[:args.limit]

    ours, ours_s = asyncio.run(ours_all(rows, args.workers, args.timeout))
    theirs, mv_s = mv_all(rows, args.workers)
    ours_ok = [o["score"] == 1.0 for o in ours]
    mv_ok = [t[0] for t in theirs]
    mine, other = confusion(ours_ok, rows), confusion(mv_ok, rows)

    print(f"{len(rows)} labelled responses ({DATA.name}); FP = scored right with a wrong final answer, "
          f"FN = not scored right with a right one")
    print(f"{'source':<15}{'n':>6}  {'ours FP':>8}{'ours FN':>8}  {'MV FP':>7}{'MV FN':>7}")

    def count(c: Counter[str], source: str | None) -> int:
        return sum(c.values()) if source is None else c[source]

    for source in (*SOURCES, None):
        n = sum(1 for r in rows if source is None or r["source"] == source)
        print(f"{source or 'total':<15}{n:>6}  {count(mine['fp'], source):>8}{count(mine['fn'], source):>8}  "
              f"{count(other['fp'], source):>7}{count(other['fn'], source):>7}")
    statuses = Counter(o["status"] for o in ours)
    print(f"our statuses: {dict(statuses)}")
    both = sum(a == b for a, b in zip(ours_ok, mv_ok))
    print(f"the two agree on {both} of {len(rows)}")
    print(f"time on {args.workers} processes: ours {ours_s:.1f} s ({len(rows) / ours_s:,.0f} responses/s), "
          f"Math-Verify {mv_s:.1f} s ({len(rows) / mv_s:,.0f} responses/s); ratio {mv_s / ours_s:.1f}x")

    print("rows where a verifier and the label disagree (id, label, ours status/score, Math-Verify):")
    for row, o, a, b in zip(rows, ours, ours_ok, mv_ok):
        if a != bool(row["label"]) or b != bool(row["label"]):
            print(f"  {row['id']:<20} label {row['label']}  ours {o['status']}/{o['score']}  math-verify {int(b)}  "
                  f"gold {row['reference'][:40]!r}  ours read {str(o['extracted'])[:50]!r}")
    if args.out:
        with args.out.open("w") as f:
            for row, o, t, a, b in zip(rows, ours, theirs, ours_ok, mv_ok):
                if a == b == bool(row["label"]):
                    continue
                f.write(json.dumps({
                    "id": row["id"], "source": row["source"], "generator": row["generator"], "label": row["label"],
                    "reference": row["reference"], "ours": o, "math_verify": {"correct": t[0], "parsed": t[1]},
                    "response_tail": row["response"][-600:],
                }) + "\n")
        print(f"disagreement rows written to {args.out}")


if __name__ == "__main__":
    main()
