"""Math verifier throughput on MATH-500 against calling math-verify ``parse`` + ``verify`` directly.

Pairs: each gold against its own reference solution (the solution's boxed answer is the final answer), and each
gold against the next problem's solution (a wrong pair). Every configuration is warmed on the pairs of the first
half of MATH-500 and timed on the pairs of the second half, so parser internals (ANTLR, sympy) are warm as in a
running service while no timed gold was seen before (our per-worker gold cache only helps within a pass, as in a
GRPO group). Figures are pairs/s and the ratio ours / math-verify:
- single worker and full pool: ours through ``verifiers.engine.pool.WorkerPool``, math-verify through a
  ``multiprocessing.Pool`` of the same size, each in fresh processes (best of ``--rounds``).
Run: python -m benchmarks.math_throughput [--workers N]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA


def load_pairs(rows: list[dict] | None = None) -> list[tuple[str, str, bool]]:
    if rows is None:
        rows = load_rows()
    right = [(r["solution"], r["answer"], True) for r in rows]
    wrong = [(rows[(i + 1) % len(rows)]["solution"], r["answer"], False) for i, r in enumerate(rows)]
    return right + wrong


def load_rows() -> list[dict]:
    return [json.loads(x) for x in (SHARED_DATA / "math" / "math500.test.jsonl").read_text().splitlines() if x]


def load_processbench_pairs(rows: list[dict]) -> list[tuple[str, str, bool]]:
    """Real model outputs: ProcessBench's Llama/Qwen solutions to MATH-500 problems, with ProcessBench's human label
    of whether the final answer is correct, graded against the MATH-500 gold."""
    path = SHARED_DATA / "prm" / "processbench_math.json"
    if not path.exists():
        return []
    golds = {r["problem"].strip(): r["answer"] for r in rows}
    pairs = []
    for item in json.loads(path.read_text()):
        if item["problem"].strip() in golds:
            steps = item["steps"] if isinstance(item["steps"], list) else json.loads(item["steps"])
            label = str(item["final_answer_correct"]) == "True"
            pairs.append(("\n\n".join(steps), golds[item["problem"].strip()], label))
    return pairs


def mv_check(pair: tuple[str, str, bool]) -> bool:
    import logging

    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout is disabled" warning on every call

    response, gold, _ = pair
    g = parse(f"${gold}$", parsing_timeout=None)
    p = parse(response, parsing_timeout=None)
    return bool(verify(g, p, timeout_seconds=None))


def ours_check(pair: tuple[str, str, bool]) -> bool:
    from verifiers.kinds.math.verifier import MathVerifier

    verifier = MathVerifier()
    return verifier.check(pair[0], pair[1], verifier.parse_options({})).score == 1.0


async def pool_rate(warm: list[tuple[str, str, bool]], pairs: list[tuple[str, str, bool]], workers: int) -> float:
    from verifiers.engine.pool import WorkerPool

    pool = WorkerPool(workers, ["verifiers.kinds.math.verifier"])
    await pool.start()
    try:
        await asyncio.gather(*(pool.run("math", r, g, {}, 60.0) for r, g, _ in warm))
        started = time.perf_counter()
        await asyncio.gather(*(pool.run("math", r, g, {}, 60.0) for r, g, _ in pairs))
        return len(pairs) / (time.perf_counter() - started)
    finally:
        await pool.close()


def mv_pool_rate(warm: list[tuple[str, str, bool]], pairs: list[tuple[str, str, bool]], workers: int) -> float:
    with multiprocessing.get_context("spawn").Pool(workers) as mp:
        mp.map(mv_check, warm, chunksize=1)  # warm each process's parser
        started = time.perf_counter()
        mp.map(mv_check, pairs, chunksize=4)
        return len(pairs) / (time.perf_counter() - started)


def print_rates(warm: list[tuple[str, str, bool]], pairs: list[tuple[str, str, bool]], workers: int, rounds: int,
                indent: str = "") -> None:
    """Single worker and full pool, ours and math-verify, each in fresh processes; the best of ``rounds``."""
    for n in sorted({1, workers}):
        ours = max(asyncio.run(pool_rate(warm, pairs, n)) for _ in range(rounds))
        theirs = max(mv_pool_rate(warm, pairs, n) for _ in range(rounds))
        label = "single worker" if n == 1 else f"full pool ({n} workers)"
        print(f"{indent}{label}: ours {ours:,.0f} pairs/s, math-verify {theirs:,.0f} pairs/s, "
              f"ratio {ours / theirs:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=3, help="Repeat each measurement; the best round is shown.")
    args = parser.parse_args()
    rows = load_rows()
    half = len(rows) // 2
    warm, pairs = load_pairs(rows[:half]), load_pairs(rows[half:])

    # Verdict agreement, in this process.
    truth = [p[2] for p in pairs]
    mv_out = [mv_check(p) for p in pairs]
    our_out = [ours_check(p) for p in pairs]
    agree = sum(a == b for a, b in zip(mv_out, our_out))
    print(f"timed pairs: {len(pairs)} (second half of MATH-500: gold vs own solution, and vs the next problem's "
          f"solution); every measurement runs in fresh processes warmed on the {len(warm)} pairs of the first half")
    print(f"correct verdicts: ours {sum(a == t for a, t in zip(our_out, truth))}/{len(pairs)}, "
          f"math-verify {sum(a == t for a, t in zip(mv_out, truth))}/{len(pairs)}; the two agree on {agree}")

    # Speed: fresh worker processes for both sides (a shared process would let one side warm the other's LaTeX
    # parser caches on the very strings being timed).
    print_rates(warm, pairs, args.workers, args.rounds)

    real = load_processbench_pairs(rows)
    if real:
        truth = [p[2] for p in real]
        ours_ok = sum(ours_check(p) == t for p, t in zip(real, truth))
        mv_ok = sum(mv_check(p) == t for p, t in zip(real, truth))
        print(f"real model outputs: {len(real)} ProcessBench (Llama/Qwen) solutions to MATH-500 problems; agreement "
              f"with the human label: ours {ours_ok}, math-verify {mv_ok}")
        print_rates(warm, real, args.workers, args.rounds, indent="  ")


if __name__ == "__main__":
    main()
