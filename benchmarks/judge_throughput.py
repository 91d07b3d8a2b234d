"""Judged items/s through the real service against an OpenAI-compatible test double with a fixed per-call latency:
cache + concurrency (the defaults) vs one uncached call at a time, on GRPO groups of 8 with duplicate answers, all
in this run. Usage: python benchmarks/judge_throughput.py [--groups 16] [--latency-ms 50] [--distinct 3]"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import service
from tests.support.fakes.openai_server import FakeOpenAI, serve

CACHE, CONCURRENCY = "REWARD_SERVICE_JUDGE_CACHE_SIZE", "REWARD_SERVICE_JUDGE_MAX_CONCURRENCY"
CONFIGS = {
    "one uncached call at a time": {CACHE: "0", CONCURRENCY: "1"},
    "concurrency 16, no cache": {CACHE: "0", CONCURRENCY: "16"},
    "cache + concurrency 16": {CACHE: "10000", CONCURRENCY: "16"},
}


def grpo_batch(groups: int, distinct: int, salt: str) -> list[dict]:
    """``groups`` prompts x 8 rollouts; each group repeats ``distinct`` answers (as sampled policies do)."""
    items = []
    for g in range(groups):
        answers = [f"After simplifying, the answer is {g * 10 + k}{salt}." for k in range(distinct)]
        for r in range(8):
            items.append({"id": f"{g}-{r}", "verifier": "judge_reference", "response": answers[r % distinct],
                          "reference": f"{g * 10}{salt}", "group": f"g{g}"})
    return items


def measure(url: str, items: list[dict]) -> float:
    with httpx.Client(base_url=url, timeout=600) as client:
        started = time.perf_counter()
        r = client.post("/v1/verify", json={"items": items})
        elapsed = time.perf_counter() - started
    r.raise_for_status()
    statuses = {x["status"] for x in r.json()["results"]}
    assert statuses == {"ok"}, statuses
    return len(items) / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--distinct", type=int, default=3, help="distinct answers per group of 8")
    args = ap.parse_args()
    rates = {}
    with serve(FakeOpenAI(latency_s=args.latency_ms / 1000)) as fake:
        base_env = {"REWARD_SERVICE_JUDGE_BASE_URL": fake.url, "REWARD_SERVICE_JUDGE_MODEL": "bench-judge",
                    "REWARD_SERVICE_WORKERS": "1"}
        for i, (label, env) in enumerate(CONFIGS.items()):
            with service({**base_env, **env}) as url:
                measure(url, grpo_batch(1, args.distinct, f"w{i}"))  # warm-up: connections, imports
                before = fake.calls
                rates[label] = measure(url, grpo_batch(args.groups, args.distinct, f"r{i}"))
                calls = fake.calls - before
            print(f"{label:>30}: {rates[label]:8.1f} items/s ({calls} judge calls for {args.groups * 8} items)")
    baseline = rates["one uncached call at a time"]
    print(f"latency {args.latency_ms:g} ms/call, {args.groups} groups x 8, {args.distinct} distinct answers/group")
    for label, rate in rates.items():
        print(f"{label:>30}: ratio {rate / baseline:6.2f}x")


if __name__ == "__main__":
    main()
