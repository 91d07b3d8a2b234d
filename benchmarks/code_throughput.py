"""Code verifier throughput: every HumanEval + MBPP reference program scored through ``POST /v1/verify`` on the
real server, next to the same programs run the way verl drives SandboxFusion (one sandbox call per test, pass =
exit 0) against the same server's ``/v1/sandbox/run`` in the same run. Prints programs/s, tests/s and the ratio.

    python -m benchmarks.code_throughput [--limit N] [--batch 64] [--concurrency 32]
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import time
from typing import Any

import httpx

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA, service  # noqa: E402


def load(limit: int | None) -> list[dict[str, Any]]:
    """Rows of (response, reference, baseline scripts): one script per test in the baseline."""
    rows = []
    with gzip.open(SHARED_DATA / "code" / "HumanEval.jsonl.gz", "rt") as f:
        for t in map(json.loads, f):
            program = t["prompt"] + t["canonical_solution"]
            ref = {"test": t["test"], "entry_point": t["entry_point"], "prompt": t["prompt"]}
            # SandboxFusion/verl run a HumanEval problem as one script: program + check + call.
            rows.append((program, ref, [f"{program}\n{t['test']}\ncheck({t['entry_point']})\n"]))
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None, help="first N programs only (HumanEval first)")
    parser.add_argument("--batch", type=int, default=64, help="items per /v1/verify request")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    args = parser.parse_args()
    rows = load(args.limit)
    with service({"REWARD_SERVICE_MAX_ITEM_TIMEOUT_S": "1200"}) as url:
        base_s, base_tests, base_ok = asyncio.run(one_test_per_call(url, rows, args.concurrency))
        our_s, our_tests, our_ok = asyncio.run(ours(url, rows, args.batch, max(1, args.concurrency // args.batch) or 1))
    n = len(rows)
    print(f"programs: {n}")
    print(f"code verifier (/v1/verify, all tests of a program in one sandbox run): {our_s:.1f}s  "
          f"{n / our_s:.1f} programs/s  {our_tests / our_s:.1f} tests/s  ({our_ok}/{our_tests} tests passed)")
    print(f"one test per sandbox call (verl/SandboxFusion style, /v1/sandbox/run): {base_s:.1f}s  "
          f"{n / base_s:.1f} programs/s  {base_tests / base_s:.1f} runs/s  ({base_ok}/{base_tests} runs passed)")
    print(f"ratio (programs/s, ours / one-test-per-call): {base_s / our_s:.2f}x")


if __name__ == "__main__":
    main()
