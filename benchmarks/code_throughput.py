"""Code verifier throughput: every HumanEval + MBPP reference program scored through ``POST /v1/verify`` on the
real server, next to the same programs run the way verl drives SandboxFusion (one sandbox call per test, pass =
exit 0) against the same server's ``/v1/sandbox/run``, and next to bare ``subprocess.run([python, "-c", script])``
calls (no isolation, no server) at ``--parallel``, all in the same run. Prints programs/s, tests/s and the ratios,
then where one item's time goes (``--breakdown N``: the first N items one at a time, in-process): the sandbox's
phases per run, the CPU the harness program used (judge + candidate, from the run's rusage) and what one bare
``python -c`` script costs in CPU, so the comparison holds on a machine others share.

    python -m benchmarks.code_throughput [--dataset humaneval|all] [--limit N] [--batch 64] [--concurrency 32]
                                         [--parallel 8] [--breakdown 40]
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA, service
from verifiers.context import SANDBOX


def load(limit: int | None, dataset: str = "all") -> list[dict[str, Any]]:
    """Rows of (response, reference, baseline scripts): one script per test in the baseline."""
    rows = []
    with gzip.open(SHARED_DATA / "code" / "HumanEval.jsonl.gz", "rt") as f:
        for t in map(json.loads, f):
            program = t["prompt"] + t["canonical_solution"]
            ref = {"test": t["test"], "entry_point": t["entry_point"], "prompt": t["prompt"]}
            # SandboxFusion/verl run a HumanEval problem as one script: program + check + call.
            rows.append((program, ref, [f"{program}\n{t['test']}\ncheck({t['entry_point']})\n"]))
    if dataset == "humaneval":
        return rows[:limit] if limit else rows
    with open(SHARED_DATA / "code" / "mbpp.jsonl") as f:
        for t in map(json.loads, f):
            ref = {"test_list": t["test_list"], "test_setup_code": t["test_setup_code"]}
            scripts = [f"{t['code']}\n{t['test_setup_code']}\n{a}\n" for a in t["test_list"]]
            rows.append((t["code"], ref, scripts))
    return rows[:limit] if limit else rows


async def ours(url: str, rows: list, batch: int, concurrency: int) -> tuple[float, int, int]:
    items = [{"verifier": "code", "response": p, "reference": r, "options": {"test_timeout_s": 30}} for p, r, _ in rows]
    chunks = [items[i:i + batch] for i in range(0, len(items), batch)]
    sem = asyncio.Semaphore(concurrency)
    passed = tests = 0
    async with httpx.AsyncClient(base_url=url, timeout=1200) as client:
        async def send(chunk: list) -> list:
            async with sem:
                r = await client.post("/v1/verify", json={"items": chunk})
                r.raise_for_status()
                return r.json()["results"]

        start = time.perf_counter()
        results = [x for part in await asyncio.gather(*(send(c) for c in chunks)) for x in part]
        elapsed = time.perf_counter() - start
    for res in results:
        tests += res["details"].get("total", 0)
        passed += res["details"].get("passed", 0)
    return elapsed, tests, passed


async def one_test_per_call(url: str, rows: list, concurrency: int) -> tuple[float, int, int]:
    scripts = [s for _, _, group in rows for s in group]
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        async def run(code: str) -> bool:
            async with sem:
                r = await client.post("/v1/sandbox/run", json={"code": code, "limits": {"wall_s": 30, "cpu_s": 30}})
                r.raise_for_status()
                return r.json()["exit_code"] == 0

        start = time.perf_counter()
        ok = await asyncio.gather(*(run(s) for s in scripts))
        elapsed = time.perf_counter() - start
    return elapsed, len(scripts), sum(ok)


def bare(rows: list, parallel: int) -> tuple[float, int, int]:
    """Each script as a plain ``python -c`` process: what running the tests costs with no sandbox at all."""
    scripts = [s for _, _, group in rows for s in group]

    def one(code: str) -> bool:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0

    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        ok = list(pool.map(one, scripts))
    return time.perf_counter() - start, len(scripts), sum(ok)


def breakdown(rows: list, n: int) -> str:
    """One item at a time through the engine and a bwrap backend in this process: sandbox phases (ms per run), the
    harness program's CPU (judge + candidate, ms per item) and a bare ``python -c`` script's CPU (ms per script)."""
    from sandbox.api import Limits, RunRequest
    from sandbox.bwrap import BwrapBackend, BwrapConfig
    from verifiers.engine import Engine
    from verifiers.engine.registry import build_registry
    from verifiers.types import VerifyItem

    rows = rows[:n]
    cpu: list[float] = []
    plain: list[float] = []

    async def measure() -> dict[str, float]:
        backend = BwrapBackend(BwrapConfig(warm_pool=2))
        await backend.start()
        run = backend.run

        async def counted(request: Any) -> Any:
            result = await run(request)
            cpu.append(result.cpu_ms)
            return result

        backend.run = counted
        engine = Engine(build_registry(), resources={SANDBOX: backend}, max_timeout_s=600)
        items = [VerifyItem("code", p, r, {"test_timeout_s": 30}) for p, r, _ in rows]
        await engine.verify_many(items[:2])  # warm the page cache
        cpu.clear()
        before = dict(backend.phase_ms)
        for item in items:
            await engine.verify_many([item])
        phases = {k: v - before.get(k, 0.0) for k, v in backend.phase_ms.items()}
        for script in (s for _, _, group in rows for s in group):  # the same tests as one plain program
            plain.append((await run(RunRequest(code=script, limits=Limits(wall_s=30, cpu_s=30)))).cpu_ms)
        await backend.close()
        return phases

    phases = asyncio.run(measure())
    runs = max(1.0, phases.pop("runs", 0.0))
    for key in ("spawn", "spawns"):
        phases.pop(key, None)
    scripts = [s for _, _, group in rows for s in group]
    start = resource.getrusage(resource.RUSAGE_CHILDREN)
    for script in scripts:
        subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    end = resource.getrusage(resource.RUSAGE_CHILDREN)
    bare_cpu = (end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime) * 1000.0 / max(1, len(scripts))
    parts = ", ".join(f"{name} {ms / runs:.1f}" for name, ms in phases.items())
    return (f"breakdown ({len(rows)} items one at a time): sandbox phases ms/run: {parts}; CPU ms per run: harness "
            f"program (judge + candidate) {sum(cpu) / max(1, len(cpu)):.1f}, the same tests as one plain sandboxed "
            f"program {sum(plain) / max(1, len(plain)):.1f}; bare python -c CPU {bare_cpu:.1f} ms/script")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None, help="first N programs only (HumanEval first)")
    parser.add_argument("--batch", type=int, default=64, help="items per /v1/verify request")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--dataset", choices=("humaneval", "all", "multilang"), default="all",
                        help="HumanEval only, + MBPP, or the multilingual mix (benchmarks/code_multilang_mix.py)")
    parser.add_argument("--parallel", type=int, default=8, help="bare processes at once; also the server's sandbox "
                                                                  "slots and warm pool")
    parser.add_argument("--breakdown", type=int, default=40, help="items measured one at a time (0: skip)")
    args = parser.parse_args()
    if args.dataset == "multilang":
        return multilang(args)
    rows = load(args.limit, args.dataset)
    env = {"REWARD_SERVICE_MAX_ITEM_TIMEOUT_S": "1200", "REWARD_SERVICE_SANDBOX_MAX_CONCURRENT": str(args.parallel),
           "REWARD_SERVICE_SANDBOX_WARM_POOL": str(args.parallel)}
    with service(env) as url:
        bare_s, bare_runs, bare_ok = bare(rows, args.parallel)
        base_s, base_tests, base_ok = asyncio.run(one_test_per_call(url, rows, args.concurrency))
        our_s, our_tests, our_ok = asyncio.run(ours(url, rows, args.batch, max(1, args.concurrency // args.batch) or 1))
    n = len(rows)
    print(f"programs: {n}")
    print(f"code verifier (/v1/verify, all tests of a program in one sandbox run): {our_s:.1f}s  "
          f"{n / our_s:.1f} programs/s  {our_tests / our_s:.1f} tests/s  ({our_ok}/{our_tests} tests passed)")
    print(f"one test per sandbox call (verl/SandboxFusion style, /v1/sandbox/run): {base_s:.1f}s  "
          f"{n / base_s:.1f} programs/s  {base_tests / base_s:.1f} runs/s  ({base_ok}/{base_tests} runs passed)")
    print(f"bare subprocess, no sandbox (python -c per script, {args.parallel} at once): {bare_s:.1f}s  "
          f"{n / bare_s:.1f} programs/s  ({bare_ok}/{bare_runs} runs passed)")
    print(f"ratio (programs/s, ours / one-test-per-call): {base_s / our_s:.2f}x")
    print(f"RATIO (programs/s, ours / bare subprocess): {bare_s / our_s:.2f}x")
    if args.breakdown:
        print(breakdown(rows, args.breakdown))


def multilang(args: argparse.Namespace) -> None:
    """The multilingual mix: the code verifier against each program's own compile and run commands, bare."""
    from benchmarks.code_multilang_mix import bare_multilang, load_multilang
    rows = load_multilang(args.limit or 4)
    env = {"REWARD_SERVICE_MAX_ITEM_TIMEOUT_S": "1200", "REWARD_SERVICE_SANDBOX_MAX_CONCURRENT": str(args.parallel),
           "REWARD_SERVICE_SANDBOX_WARM_POOL": str(args.parallel)}
    with service(env) as url:
        bare_s, bare_runs, bare_ok = bare_multilang(rows, args.parallel)
        our_s, our_tests, our_ok = asyncio.run(ours(url, rows, args.batch, max(1, args.concurrency // args.batch)))
    n = len(rows)
    print(f"multilingual programs: {n} (MultiPL-E x10 languages, HumanEval-X cpp/java/js)")
    print(f"code verifier (/v1/verify, program + appended tests in one sandbox run): {our_s:.1f}s  "
          f"{n / our_s:.2f} programs/s  ({our_ok}/{our_tests} tests passed)")
    print(f"bare processes, no sandbox (the languages' own compile + run, {args.parallel} at once): {bare_s:.1f}s  "
          f"{n / bare_s:.2f} programs/s  ({bare_ok}/{bare_runs} passed)")
    print(f"RATIO (programs/s, ours / bare processes): {bare_s / our_s:.2f}x")


if __name__ == "__main__":
    main()
