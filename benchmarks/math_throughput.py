"""Math verifier throughput on MATH-500 against calling math-verify ``parse`` + ``verify`` directly.

Pairs: each gold against its own reference solution (the solution's boxed answer is the final answer), and each
gold against the next problem's solution (a wrong pair). Every configuration is warmed on the pairs of the first
half of MATH-500 and timed on the pairs of the second half, so parser internals (ANTLR, sympy) are warm as in a
running service while no timed gold was seen before (our per-worker gold cache only helps within a pass, as in a
GRPO group). Figures are pairs/s and the ratio ours / math-verify:
- single worker: both in this process, one pair after another;
- full pool: ours through ``verifiers.pool.WorkerPool`` (one worker per core), math-verify through a
  ``multiprocessing.Pool`` of the same size.
Run: python -m benchmarks.math_throughput [--workers N]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import time

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA  # noqa: E402


def load_pairs(rows: list[dict] | None = None) -> list[tuple[str, str, bool]]:
    if rows is None:
        rows = load_rows()
    right = [(r["solution"], r["answer"], True) for r in rows]
    wrong = [(rows[(i + 1) % len(rows)]["solution"], r["answer"], False) for i, r in enumerate(rows)]
    return right + wrong


def load_rows() -> list[dict]:
    return [json.loads(x) for x in (SHARED_DATA / "math" / "math500.test.jsonl").read_text().splitlines() if x]


def mv_check(pair: tuple[str, str, bool]) -> bool:
    from math_verify import parse, verify

    response, gold, _ = pair
    g = parse(f"${gold}$", parsing_timeout=None)
    p = parse(response, parsing_timeout=None)
    return bool(verify(g, p, timeout_seconds=None))


def ours_check(pair: tuple[str, str, bool]) -> bool:
    from verifiers.math.verifier import MathVerifier

    verifier = MathVerifier()
    return verifier.check(pair[0], pair[1], verifier.parse_options({})).score == 1.0


def clear_caches() -> None:
    from verifiers.math.normalize import canonical
    from verifiers.math.symbolic import parse_latex
    from verifiers.math.verifier import parse_gold

    parse_gold.cache_clear()
    parse_latex.cache_clear()
    canonical.cache_clear()


def timed(fn, pairs) -> tuple[float, list[bool]]:
    started = time.perf_counter()
    out = [fn(p) for p in pairs]
    return len(pairs) / (time.perf_counter() - started), out


async def pool_rate(warm: list[tuple[str, str, bool]], pairs: list[tuple[str, str, bool]], workers: int) -> float:
    from verifiers.pool import WorkerPool

    pool = WorkerPool(workers, ["verifiers.math.verifier"])
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    rows = load_rows()
    half = len(rows) // 2
    warm, pairs = load_pairs(rows[:half]), load_pairs(rows[half:])

    # Warm both on the first half (shared parser internals), then time each on the second half.
    timed(mv_check, warm)
    timed(ours_check, warm)
    mv_rate, mv_out = timed(mv_check, pairs)
    our_rate, our_out = timed(ours_check, pairs)
    truth = [p[2] for p in pairs]
    agree = sum(a == b for a, b in zip(mv_out, our_out))
    print(f"timed pairs: {len(pairs)} (second half of MATH-500: gold vs own solution, and vs the next problem's "
          f"solution); warm-up: {len(warm)} pairs of the first half")
    print(f"correct verdicts: ours {sum(a == t for a, t in zip(our_out, truth))}/{len(pairs)}, "
          f"math-verify {sum(a == t for a, t in zip(mv_out, truth))}/{len(pairs)}; the two agree on {agree}")
    print(f"single worker: ours {our_rate:,.0f} pairs/s, math-verify {mv_rate:,.0f} pairs/s, "
          f"ratio {our_rate / mv_rate:.1f}x")

    our_pool = asyncio.run(pool_rate(warm, pairs, args.workers))
    mv_pool = mv_pool_rate(warm, pairs, args.workers)
    print(f"full pool ({args.workers} workers): ours {our_pool:,.0f} pairs/s, math-verify {mv_pool:,.0f} pairs/s, "
          f"ratio {our_pool / mv_pool:.1f}x")


if __name__ == "__main__":
    main()
