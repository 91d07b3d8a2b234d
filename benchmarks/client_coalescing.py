"""Per-sample reward calls with and without client-side coalescing, against the real service, in the same run.

    python benchmarks/client_coalescing.py [--samples 256] [--repeats 3]

Callers as trainers make them, one sample per call, all at once:
- async: ``samples`` concurrent calls on one event loop (verl's reward loop with ``compute_score_async``, async TRL
  functions); without coalescing each call is one request (``AsyncRewardClient.verify_one``, ``max_concurrency`` 4
  as shipped, and 64), with coalescing it is verl's ``compute_score_async`` from ``reward_client/verl.py``;
- threads: a thread pool calling a blocking client per sample (verl's sync ``compute_score``, which verl runs in
  its loop's default executor: min(32, cores + 4) threads), 6 and 32 threads;
- batched: one ``verify`` call with every sample, the ceiling.
Verifier ``exact_match`` (cheap), so the figures are the HTTP round trips. Ratio: samples/s over the same caller's
samples/s without coalescing. Requests are counted by the server (``reward_requests_total``).
"""
from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))

from reward_client import AsyncRewardClient, RewardClient, VerifyItem
from reward_client.verl import compute_score_async

from benchmarks._common import service


def verify_requests(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    found = re.findall(r'^reward_requests_total\{[^}]*route="/v1/verify"[^}]*\} ([0-9.e+]+)$', text, flags=re.M)
    return int(sum(float(v) for v in found))


def measure(url: str, repeats: int, run: Callable[[], None]) -> tuple[float, float]:
    """Median seconds of ``run`` and the requests one run sent."""
    run()  # warm: connections, the coalescer's thread, the server's first requests
    times, sent = [], []
    for _ in range(repeats):
        before = verify_requests(url)
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
        sent.append(verify_requests(url) - before)
    return statistics.median(times), statistics.median(sent)


def async_run(make: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    return lambda: asyncio.run(make())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n = args.samples
    answers = [f"answer {i}" for i in range(n)]
    responses = [a if i % 3 else "wrong" for i, a in enumerate(answers)]

    with service() as url:
        async def plain(concurrency: int) -> None:
            async with AsyncRewardClient(url, max_concurrency=concurrency) as client:
                await asyncio.gather(*(client.verify_one("exact_match", r, a) for r, a in zip(responses, answers)))

        async def coalesced() -> None:
            await asyncio.gather(*(compute_score_async("x", r, a, {"verifier": "exact_match"}, reward_service_url=url)
                                   for r, a in zip(responses, answers)))

        clients: list[RewardClient] = []

        def threads(workers: int, coalesce: bool) -> Callable[[], None]:
            client = RewardClient(url, coalesce=coalesce)
            clients.append(client)

            def run() -> None:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    list(pool.map(lambda ra: client.verify_one("exact_match", *ra), zip(responses, answers)))

            return run

        def batched() -> None:
            with RewardClient(url) as client:
                client.verify([VerifyItem("exact_match", r, a) for r, a in zip(responses, answers)])

        rows = [
            ("async, max_concurrency 4", async_run(lambda: plain(4)), async_run(coalesced)),
            ("async, max_concurrency 64", async_run(lambda: plain(64)), async_run(coalesced)),
            ("6 threads (verl's pool on 2 cores)", threads(6, False), threads(6, True)),
            ("32 threads", threads(32, False), threads(32, True)),
        ]
        batch_s, batch_req = measure(url, args.repeats, batched)
        print(f"{n} per-sample calls, exact_match, median of {args.repeats}; samples/s (HTTP requests per run)")
        print(f"{'caller':<36} {'without':>16} {'coalesced':>16} {'ratio':>7}")
        for label, without, with_ in rows:
            t0, r0 = measure(url, args.repeats, without)
            t1, r1 = measure(url, args.repeats, with_)
            print(f"{label:<36} {n / t0:>9.0f} ({r0:>4.0f}) {n / t1:>9.0f} ({r1:>4.0f}) {t0 / t1:>7.1f}")
        print(f"{'one batched verify call (ceiling)':<36} {'':>16} {n / batch_s:>9.0f} ({batch_req:>4.0f})")
        for client in clients:
            client.close()


if __name__ == "__main__":
    main()
