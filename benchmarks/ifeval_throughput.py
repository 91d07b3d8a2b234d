"""Responses/s of the ifeval checker on IFEval's GPT-4 responses: in this process, one after another, vs through
the service's worker pool (every response an independent pool job, as the server runs them), both in this run.

Usage: python benchmarks/ifeval_throughput.py [--mode strict|loose] [--workers N] [--rounds 3]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA
from verifiers.engine.pool import WorkerPool
from verifiers.kinds.ifeval import IfEvalVerifier


def load() -> list[tuple[str, dict]]:
    root = SHARED_DATA / "ifeval"
    inputs = {json.loads(x)["prompt"]: json.loads(x) for x in (root / "input_data.jsonl").open()}
    out = []
    for line in (root / "input_response_data_gpt4.jsonl").open():
        row = json.loads(line)
        spec = inputs.get(row["prompt"])
        if spec is None:  # one response's prompt differs from input_data.jsonl by a character
            continue
        out.append((row["response"], {"instruction_id_list": spec["instruction_id_list"], "kwargs": spec["kwargs"]}))
    return out


def in_process(data: list[tuple[str, dict]], mode: str) -> float:
    verifier = IfEvalVerifier()
    options = verifier.parse_options({"mode": mode})
    started = time.perf_counter()
    for response, reference in data:
        verifier.check(response, reference, options)
    return len(data) / (time.perf_counter() - started)


async def through_pool(data: list[tuple[str, dict]], mode: str, workers: int, rounds: int) -> float:
    pool = WorkerPool(workers, ["verifiers.kinds.ifeval"])
    await pool.start()
    try:
        await asyncio.gather(*(pool.run("ifeval", r, ref, {"mode": mode}, 30.0) for r, ref in data[:workers * 4]))
        best = 0.0
        for _ in range(rounds):
            started = time.perf_counter()
            verdicts = await asyncio.gather(*(pool.run("ifeval", r, ref, {"mode": mode}, 30.0) for r, ref in data))
            best = max(best, len(data) / (time.perf_counter() - started))
            bad = [v for v in verdicts if v.status.value not in ("ok", "no_answer")]
            assert not bad, bad[:3]
    finally:
        await pool.close()
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mode", choices=["strict", "loose"], default=None, help="default: both")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    data = load()
    in_process(data[:20], "loose")  # warm-up: langdetect profiles, regex caches
    print(f"{len(data)} GPT-4 responses, {args.workers} pool workers, best of {args.rounds} rounds")
    print(f"{'mode':>6} {'in-process resp/s':>18} {'pool resp/s':>12} {'pool / in-process':>18}")
    for mode in [args.mode] if args.mode else ["strict", "loose"]:
        single = max(in_process(data, mode) for _ in range(args.rounds))
        pooled = asyncio.run(through_pool(data, mode, args.workers, args.rounds))
        print(f"{mode:>6} {single:>18.0f} {pooled:>12.0f} {pooled / single:>18.2f}")


if __name__ == "__main__":
    main()
