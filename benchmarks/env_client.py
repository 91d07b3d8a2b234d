"""What the environment session client adds to a step, against the real service, in one run:

a ``python`` session stepped with a trivial cell through a bare ``httpx.Client`` POST (the baseline: the wire and the
service alone), through ``EnvClient`` (blocking: its private event loop thread, the pinned-call checks, the stall
watchdog), and through ``AsyncEnvClient`` from a caller's loop. Rounds alternate between the three (A B C A B C) so
load drift hits each alike; the figures are per-step p50 and p99 and each client's p50 over the baseline's.

    python -m benchmarks.env_client [--steps 200] [--rounds 4]
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))

from reward_client.environments import AsyncEnvClient, EnvClient

from benchmarks._common import service

CODE = "x = 6 * 7"


def bare(url: str, steps: int) -> list[float]:
    with httpx.Client(base_url=url, timeout=60) as c:
        sid = c.post("/envs/python/reset", json={}).json()["observation"]["session_id"]
        out = []
        for _ in range(steps):
            t = time.perf_counter()
            r = c.post("/envs/python/step", json={"action": {"code": CODE}, "session_id": sid})
            out.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
        c.post("/envs/python/close", json={"session_id": sid})
    return out


def blocking(envs: EnvClient, steps: int) -> list[float]:
    session = envs.reset("python")
    out = []
    for _ in range(steps):
        t = time.perf_counter()
        envs.step(session, {"code": CODE})
        out.append(time.perf_counter() - t)
    envs.close(session)
    return out


def asynchronous(url: str, steps: int) -> list[float]:
    async def run() -> list[float]:
        async with AsyncEnvClient(url) as envs:
            session = await envs.reset("python")
            out = []
            for _ in range(steps):
                t = time.perf_counter()
                await envs.step(session, {"code": CODE})
                out.append(time.perf_counter() - t)
            await envs.close(session)
            return out

    return asyncio.run(run())


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with service() as url, EnvClient(url) as envs:
        blocking(envs, 10)  # warm the connections and the pool of sessions
        times: dict[str, list[float]] = {"bare httpx": [], "EnvClient": [], "AsyncEnvClient": []}
        for _ in range(args.rounds):
            times["bare httpx"] += bare(url, args.steps)
            times["EnvClient"] += blocking(envs, args.steps)
            times["AsyncEnvClient"] += asynchronous(url, args.steps)
    base = statistics.median(times["bare httpx"])
    for name, values in times.items():
        print(f"{name:15s} step p50 {ms(values, 0.5):6.2f} ms  p99 {ms(values, 0.99):6.2f} ms  "
              f"p50 / bare {statistics.median(values) / base:4.2f}x  ({len(values)} steps)")


if __name__ == "__main__":
    main()
