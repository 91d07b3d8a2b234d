"""What losing an instance mid-run costs a client given two instances' URLs, against the real service.

    python benchmarks/client_failover.py [--items 20000] [--chunk 100]

Two ``reward-service serve`` processes on loopback; ``items`` cheap ``exact_match`` items through one
``AsyncRewardClient([a, b])``, twice: with both instances up (the baseline), and with instance b SIGKILLed once it
has answered a third of its expected share, so the rest of the run (and b's chunks in flight) land on a. Ratio:
items/s with the kill over items/s without. Each run checks that every item was answered once, in order. On a
machine with few cores the two instances compete for the same cores, so the figure is the cost of failover (the
chunks re-sent, the lost instance's share of the CPU unused while it is down), not a capacity measure.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))

from reward_client import AsyncRewardClient, RetryPolicy

from benchmarks._common import ROOT, free_port, wait_ready


@contextlib.contextmanager
def instance() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {**os.environ, "REWARD_SERVICE_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "reward_service", "serve", "--port", str(port)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/readyz", proc)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


def items(n: int) -> list[dict[str, Any]]:
    return [{"verifier": "exact_match", "id": str(k), "response": str(k), "reference": str(k)} for k in range(n)]


async def run(urls: list[str], n: int, chunk: int, victim: subprocess.Popen[bytes] | None) -> dict[str, Any]:
    sent = items(n)
    policy = RetryPolicy(budget_s=120.0, base_delay_s=0.05, max_delay_s=1.0)
    async with AsyncRewardClient(urls, chunk_size=chunk, retry=policy) as client:
        started = time.perf_counter()
        task = asyncio.ensure_future(client.verify(sent))
        killed_at = None
        while not task.done():
            if victim is not None and killed_at is None and client.instance_stats()[1]["items"] >= n // 6:
                os.kill(victim.pid, signal.SIGKILL)
                killed_at = sum(s["items"] for s in client.instance_stats())
            await asyncio.sleep(0.005)
        results = task.result()
        elapsed = time.perf_counter() - started
        stats = client.instance_stats()
    assert [r.id for r in results] == [i["id"] for i in sent] and all(r.score == 1.0 for r in results)
    assert sum(s["items"] for s in stats) == n
    if victim is not None:
        assert killed_at is not None, "the run ended before the kill; give more --items"
    return {"items_s": n / elapsed, "elapsed": elapsed, "stats": stats, "killed_at": killed_at}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=100)
    args = parser.parse_args()
    with instance() as (a, _), instance() as (b, proc_b):
        asyncio.run(run([a, b], 2000, args.chunk, None))  # warm both instances
        both = asyncio.run(run([a, b], args.items, args.chunk, None))
        lost = asyncio.run(run([a, b], args.items, args.chunk, proc_b))
    shares = " / ".join(f"{s['items']}" for s in both["stats"])
    print(f"{args.items} exact_match items, chunks of {args.chunk}, one AsyncRewardClient over 2 instances")
    print(f"  both up:            {both['items_s']:8.0f} items/s ({both['elapsed']:.1f} s; "
          f"items per instance {shares})")
    b_stats = lost["stats"][1]
    print(f"  b SIGKILLed mid-run: {lost['items_s']:7.0f} items/s ({lost['elapsed']:.1f} s; killed after "
          f"{lost['killed_at']} items answered, b answered {b_stats['items']}, {b_stats['resent']} chunks re-sent)")
    print(f"  ratio (killed / both up): {lost['items_s'] / both['items_s']:.2f}x; every item answered once, in order")


if __name__ == "__main__":
    main()
