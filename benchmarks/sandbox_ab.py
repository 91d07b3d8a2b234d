"""The sandbox's cost per run in this checkout against another one (a worktree of an older commit), on a box whose
speed drifts: each checkout keeps a bwrap backend of its own warm in a process of its own, and the two take turns
running bursts of runs, 8 at a time; the whole machine's CPU time (``/proc/stat``: kernel threads and deferred
work included) is charged to the burst it falls in. Prints each side's median CPU per run and runs/s, and the
median of the paired ratios, this checkout over the other.

    python -m benchmarks.sandbox_ab OTHER_CHECKOUT [--mode trivial|code] [--bursts 10] [--runs 200]

``trivial``: ``print(1)`` run after run (what a run costs the sandbox itself); ``code``: HumanEval + MBPP
reference programs scored by the code verifier in-process (engine + backend, no HTTP), cycling through the set.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs in each checkout (cwd and sys.path are the checkout): only what every layout since the bwrap backend has.
WORKER = r'''
import asyncio, gzip, json, os, sys, time
sys.path.insert(0, os.getcwd())
from sandbox.api import Limits, RunRequest
from sandbox.bwrap import BwrapBackend, BwrapConfig
MODE, DATA = sys.argv[1], sys.argv[2]

def code_items():
    from verifiers.engine import Engine
    from verifiers.types import VerifyItem
    try:
        from verifiers.context import SANDBOX
        from verifiers.engine.registry import build_registry
    except ImportError:
        SANDBOX = "sandbox"
        from verifiers.registry import build_registry
    items = []
    with gzip.open(os.path.join(DATA, "code", "HumanEval.jsonl.gz"), "rt") as f:
        for t in map(json.loads, f):
            ref = {"test": t["test"], "entry_point": t["entry_point"], "prompt": t["prompt"]}
            items.append(VerifyItem("code", t["prompt"] + t["canonical_solution"], ref, {"test_timeout_s": 30}))
    with open(os.path.join(DATA, "code", "mbpp.jsonl")) as f:
        for t in map(json.loads, f):
            ref = {"test_list": t["test_list"], "test_setup_code": t["test_setup_code"]}
            items.append(VerifyItem("code", t["code"], ref, {"test_timeout_s": 30}))
    return items, Engine, build_registry, SANDBOX

async def main():
    backend = BwrapBackend(BwrapConfig(warm_pool=8, max_concurrent=8))
    await backend.start()
    if MODE == "code":
        items, Engine, build_registry, key = code_items()
        engine = Engine(build_registry(), resources={key: backend}, max_timeout_s=600)
    gate = asyncio.Semaphore(8)

    async def trivial():
        async with gate:
            result = await backend.run(RunRequest(code="print(1)", limits=Limits(wall_s=10, cpu_s=10)))
            assert result.exit_code == 0, result

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    done = 0
    while line := await reader.readline():
        n = int(line)
        start = time.perf_counter()
        if MODE == "code":
            verdicts = await engine.verify_many([items[(done + i) % len(items)] for i in range(n)])
            assert all(v.score == 1.0 for v in verdicts), "a reference program failed its tests"
        else:
            await asyncio.gather(*(trivial() for _ in range(n)))
        done += n
        elapsed = time.perf_counter() - start
        await asyncio.sleep(0.3)  # the kernel's deferred work of this burst (namespace teardown) lands in it
        print(f"{elapsed:.4f}", flush=True)
    await backend.close()

asyncio.run(main())
'''


def busy_seconds() -> float:
    """CPU time the whole machine spent busy (user, nice, system, irq, softirq; not steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", help="the checkout to compare with (e.g. git worktree add /tmp/base <commit>)")
    parser.add_argument("--mode", choices=("trivial", "code"), default="trivial")
    parser.add_argument("--bursts", type=int, default=10, help="paired bursts measured (one more warms)")
    parser.add_argument("--runs", type=int, default=200, help="runs (or programs) per burst")
    args = parser.parse_args()
    data = str(ROOT.parent / "shared" / "data")
    sides = {"this": str(ROOT), "other": str(Path(args.other).resolve())}
    procs = {}
    for name, path in sides.items():
        procs[name] = subprocess.Popen([sys.executable, "-c", WORKER, args.mode, data], cwd=path, text=True,
                                       env={**os.environ, "PYTHONPATH": path}, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE)
        assert procs[name].stdout and procs[name].stdout.readline().strip() == "ready", f"{path} did not start"
    got: dict[str, list[tuple[float, float]]] = {"this": [], "other": []}
    for burst in range(args.bursts + 1):
        for name in ("this", "other") if burst % 2 else ("other", "this"):
            proc = procs[name]
            assert proc.stdin and proc.stdout
            before = busy_seconds()
            proc.stdin.write(f"{args.runs}\n")
            proc.stdin.flush()
            wall = float(proc.stdout.readline())
            cpu = busy_seconds() - before
            if burst:  # the first round warms both
                got[name].append((1000.0 * cpu / args.runs, args.runs / wall))
    for proc in procs.values():
        assert proc.stdin
        proc.stdin.close()
        proc.wait()
    cpu_ratios = [a[0] / b[0] for a, b in zip(got["this"], got["other"])]
    rate_ratios = [a[1] / b[1] for a, b in zip(got["this"], got["other"])]
    for name, path in sides.items():
        print(f"{name} ({path}): CPU {statistics.median(c for c, _ in got[name]):.2f} ms per run, "
              f"{statistics.median(r for _, r in got[name]):.1f} runs/s (medians of {args.bursts} bursts of "
              f"{args.runs}, mode {args.mode})")
    print(f"RATIO this / other: CPU per run {statistics.median(cpu_ratios):.3f} (pairs {min(cpu_ratios):.3f}-"
          f"{max(cpu_ratios):.3f}); runs/s {statistics.median(rate_ratios):.3f}")


if __name__ == "__main__":
    main()
