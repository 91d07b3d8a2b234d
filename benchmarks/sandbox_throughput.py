"""Sandbox throughput: HumanEval canonical solutions + their tests, programs/s through the bwrap sandbox (warm pool)
vs plain ``subprocess.run([sys.executable, "-c", program])`` at the same parallelism, in the same run.

Prints the ratio (sandbox / plain; > 1 means the isolated runs are faster) and the p50/p99 latency of a trivial
program both ways, and where a sandboxed run's time goes (per-run means of the backend's phases: slot wait, warm
take, job write, the supervisor's mount/setup, program, report, kill/drain, teardown; plus the warm pool's refills).
Usage: python benchmarks/sandbox_throughput.py [--parallel 8] [--repeat 1] [--limit 164]
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA
from sandbox.api import Limits, RunRequest, RunStatus
from sandbox.bwrap import BwrapBackend, BwrapConfig


def humaneval_programs(limit: int) -> list[str]:
    path = SHARED_DATA / "code" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as f:
        tasks = [json.loads(line) for line in f][:limit]
    return [t["prompt"] + t["canonical_solution"] + "\n\n" + t["test"] + f"\n\ncheck({t['entry_point']})\n"
            for t in tasks]


def plain(programs: list[str], parallel: int) -> tuple[float, int]:
    def one(code: str) -> int:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode

    t0 = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        codes = list(pool.map(one, programs))
    return time.perf_counter() - t0, sum(c == 0 for c in codes)


async def sandboxed(backend: BwrapBackend, programs: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    results = await backend.run_many([RunRequest(code=p, limits=Limits(wall_s=30)) for p in programs])
    return time.perf_counter() - t0, sum(r.status is RunStatus.OK for r in results)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def latency(backend: BwrapBackend, n: int) -> tuple[list[float], list[float]]:
    sb, pl = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        await backend.run(RunRequest(code="print(1)"))
        sb.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.03)  # let the pool refill, as between a trainer's requests
        t0 = time.perf_counter()
        # Blocking on purpose: the plain baseline is timed with the loop (and the pool's refills) paused.
        subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True)  # noqa: ASYNC221
        pl.append((time.perf_counter() - t0) * 1000)
    return sb, pl


async def one_at_a_time(backend: BwrapBackend, programs: list[str]) -> tuple[float, float]:
    """(mean wall ms per run, median program CPU ms) with nothing running beside: the sandbox's own cost per run."""
    cpu = []
    t0 = time.perf_counter()
    for program in programs:
        cpu.append((await backend.run(RunRequest(code=program, limits=Limits(wall_s=30)))).cpu_ms)
    return (time.perf_counter() - t0) * 1000 / len(programs), statistics.median(cpu)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1, help="passes over the data set")
    ap.add_argument("--limit", type=int, default=164)
    ap.add_argument("--latency-n", type=int, default=100)
    args = ap.parse_args()
    programs = humaneval_programs(args.limit) * args.repeat

    backend = BwrapBackend(BwrapConfig(warm_pool=2 * args.parallel, max_concurrent=args.parallel))
    await backend.start()
    while not backend.ready:  # noqa: ASYNC110 - the backend exposes readiness as a flag (for /readyz), not an Event
        await asyncio.sleep(0.05)
    await sandboxed(backend, programs[:8])  # warm the page cache for both sides
    plain(programs[:8], args.parallel)

    t_plain, ok_plain = plain(programs, args.parallel)
    await asyncio.sleep(0.5)
    before = dict(backend.phase_ms)
    t_sb, ok_sb = await sandboxed(backend, programs)
    phases = {k: v - before.get(k, 0.0) for k, v in backend.phase_ms.items()}
    sb_lat, pl_lat = await latency(backend, args.latency_n)
    one_wall, one_cpu = await one_at_a_time(backend, programs[:args.limit])
    await backend.close()

    n = len(programs)
    print(f"HumanEval programs: {n} (passing: plain {ok_plain}, sandbox {ok_sb}), parallel {args.parallel}")
    print(f"plain subprocess.run: {n / t_plain:7.1f} programs/s")
    print(f"bwrap sandbox (warm): {n / t_sb:7.1f} programs/s  (warm hits {backend.stats['warm_hits']}, "
          f"cold starts {backend.stats['cold_starts']})")
    print(f"RATIO sandbox/plain throughput: {t_plain / t_sb:.2f}x")
    print(f"trivial program latency ms: sandbox p50 {statistics.median(sb_lat):.1f} p99 {pct(sb_lat, 0.99):.1f}; "
          f"plain p50 {statistics.median(pl_lat):.1f} p99 {pct(pl_lat, 0.99):.1f}; "
          f"RATIO p50 plain/sandbox {statistics.median(pl_lat) / statistics.median(sb_lat):.2f}x")
    print(breakdown(phases))
    print(f"one at a time: {one_wall:.1f} ms per HumanEval program through the sandbox, of which the program's own "
          f"CPU (median) {one_cpu:.1f} ms")


def breakdown(phases: dict[str, float]) -> str:
    """Per-run means of the throughput pass's phases (ms); refills run beside the runs, on the same cores."""
    runs = max(1.0, phases.pop("runs", 0.0))
    spawns, spawn = phases.pop("spawns", 0.0), phases.pop("spawn", 0.0)
    parts = ", ".join(f"{name} {ms / runs:.1f}" for name, ms in phases.items())
    return (f"per-run time breakdown ms (mean of {runs:.0f} runs): {parts}; "
            f"sandbox starts {spawns:.0f}, {spawn / max(1.0, spawns):.1f} ms each")


if __name__ == "__main__":
    asyncio.run(main())
