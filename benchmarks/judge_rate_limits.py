"""A small request's wait behind a big one under a judge rate limit: the rate gate's turns by request against one
first-in-first-out queue (the same gate with every call in one source), both in this run, through the real judge
backend and engine against the OpenAI-compatible test double. Also prints the most calls the double received in
any second against what the limit allows.

Usage: python benchmarks/judge_rate_limits.py [--rpm 1200] [--big 120] [--small 10] [--latency-ms 30]"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.fakes.openai_server import FakeOpenAI, serve
from verifiers.context import request_source
from verifiers.engine import Engine
from verifiers.engine.registry import load_modules
from verifiers.kinds.judges.backends import OpenAIChatBackend
from verifiers.kinds.judges.registry import JUDGES, JudgeRegistry
from verifiers.types import VerifyItem


def items(name: str, n: int) -> list[VerifyItem]:
    return [VerifyItem("judge_reference", f"{name} {i}: the answer is {i}", str(i)) for i in range(n)]


async def scenario(url: str, rpm: int, big: int, small: int, fair: bool) -> tuple[float, float]:
    """Seconds until the small request is done, and until the big one is, the small one sent 0.5 s after."""
    backend = OpenAIChatBackend("default", url, "judge-model", max_concurrency=8, requests_per_minute=rpm)
    judges = JudgeRegistry({"default": backend}, cache_size=0)
    engine = Engine(load_modules(["verifiers.kinds.judges"]), resources={JUDGES: judges}, default_timeout_s=600)
    started = time.perf_counter()

    async def request(name: str, n: int, delay: float) -> float:
        await asyncio.sleep(delay)
        request_source.set(name if fair else "everyone")  # FIFO baseline: one source, first come first served
        verdicts = await engine.verify_many(items(name, n))
        assert all(v.status.value == "ok" for v in verdicts), verdicts[0].reason
        return time.perf_counter() - started

    try:
        big_done, small_done = await asyncio.gather(request("big", big, 0.0), request("small", small, 0.5))
    finally:
        await judges.aclose()
    return small_done - 0.5, big_done


def most_per_second(times: list[float]) -> int:
    times = sorted(times)
    start, best = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - 1.0:
            start += 1
        best = max(best, end - start + 1)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--big", type=int, default=120)
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=30.0)
    args = parser.parse_args()
    with serve(FakeOpenAI(latency_s=args.latency_ms / 1000)) as fake:
        results = {}
        for fair in (False, True):
            fake.reset()
            results[fair] = asyncio.run(scenario(fake.url, args.rpm, args.big, args.small, fair))
            peak = most_per_second(fake.arrivals)
            label = "turns by request" if fair else "one FIFO queue"
            print(f"{label:>17}: small request done in {results[fair][0]:6.2f} s, big in {results[fair][1]:6.2f} s; "
                  f"most calls in any second at the double: {peak} (limit {args.rpm} RPM, paced "
                  f"{args.rpm / 60:g}/s)")
    fifo, fair_ = results[False][0], results[True][0]
    print(f"small request's latency: {fifo / fair_:.1f}x shorter with turns by request "
          f"({args.big} + {args.small} items, {args.rpm} RPM, {args.latency_ms:g} ms per call)")


if __name__ == "__main__":
    main()
