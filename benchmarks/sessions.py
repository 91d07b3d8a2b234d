"""Environment sessions on the real service, over HTTP, in one run:

- the HTTP floor (``GET /healthz``: what any call costs on this machine now),
- a trivial ``python`` step's p50/p99 beside a stateless ``/v1/sandbox/run`` of the same code (the baseline: a
  fresh sandboxed program per call), and their ratio (target: the step's p50 at most a third of the run's);
- session create (``POST /envs/python/reset``) p50/p99 on a warm pool (target p50 <= 50 ms);
- the most idle ``python`` sessions held open at once (up to ``--sessions``, or until MemAvailable would fall under
  ``--floor-gib``), each checked alive afterwards, and the memory each costs (the fall of MemAvailable over them:
  what the whole machine gave, kernel included);
- steps/s with ``--episodes`` concurrent episodes (each a session stepping ``--steps`` times).

    python -m benchmarks.sessions [--calls 200] [--creates 40] [--sessions 500] [--episodes 64] [--steps 10]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import service

CODE = "x = 6 * 7\nprint(x)"


def available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def reset(c: httpx.Client) -> str:
    r = c.post("/envs/python/reset", json={})
    assert r.status_code == 200, r.text
    sid: str = r.json()["observation"]["session_id"]
    return sid


def hold_idle(url: str, most: int, floor: int) -> tuple[int, float, list[str]]:
    """Open sessions (8 at a time) until ``most`` or the memory floor: (how many, bytes each, their ids)."""
    before = available()
    sids: list[str] = []
    with httpx.Client(base_url=url, timeout=300) as c, ThreadPoolExecutor(8) as pool:
        while len(sids) < most and available() > floor:
            batch = min(8, most - len(sids))
            sids += list(pool.map(lambda _: reset(c), range(batch)))
    time.sleep(3.0)  # let the pool's refills and the kernel's deferred frees settle
    each = (before - available()) / max(1, len(sids))
    return len(sids), each, sids


async def episodes(url: str, count: int, steps: int) -> float:
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=httpx.Limits(max_connections=count)) as c:
        sids = [(await c.post("/envs/python/reset", json={})).json()["observation"]["session_id"] for _ in range(count)]

        async def one(sid: str) -> None:
            for i in range(steps):
                r = await c.post("/envs/python/step", json={"session_id": sid, "action": {"code": f"y = {i}\ny"}})
                assert r.status_code == 200 and r.json()["observation"]["value"] == str(i), r.text

        started = time.perf_counter()
        await asyncio.gather(*(one(s) for s in sids))
        elapsed = time.perf_counter() - started
        for sid in sids:
            await c.post("/envs/python/close", json={"session_id": sid})
    return count * steps / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--creates", type=int, default=40)
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--floor-gib", type=float, default=2.0)
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    env = {"REWARD_SERVICE_ENV_MAX_SESSIONS": str(args.sessions + args.episodes + 64),
           "REWARD_SERVICE_ENV_MAX_SESSIONS_PER_CLIENT": str(args.sessions + args.episodes + 64),
           "REWARD_SERVICE_ENV_SESSION_WARM_POOL": "8", "REWARD_SERVICE_ENV_IDLE_TTL_S": "3600"}
    print(f"# {datetime.date.today()} {platform.node()} {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB, "
          f"load {os.getloadavg()[0]:.1f}")
    with service(env) as url, httpx.Client(base_url=url, timeout=120) as c:
        sid = reset(c)
        calls = {
            "floor": lambda: c.get("/healthz"),
            "run": lambda: c.post("/v1/sandbox/run", json={"code": CODE}),
            "step": lambda: c.post("/envs/python/step", json={"session_id": sid, "action": {"code": CODE}}),
        }
        times: dict[str, list[float]] = {name: [] for name in calls}
        for i in range(args.calls + 20):  # A B C A B C: each sees the same load (20 to warm up, not counted)
            for name, call in calls.items():
                started = time.perf_counter()
                r = call()
                if i >= 20:
                    times[name].append(time.perf_counter() - started)
                assert r.status_code == 200, r.text
        floor, run, step = times["floor"], times["run"], times["step"]
        print(f"HTTP floor (GET /healthz)  p50 {pct(floor, .5):7.2f} ms  p99 {pct(floor, .99):7.2f} ms")
        print(f"stateless /v1/sandbox/run  p50 {pct(run, .5):7.2f} ms  p99 {pct(run, .99):7.2f} ms")
        print(f"python step (session)      p50 {pct(step, .5):7.2f} ms  p99 {pct(step, .99):7.2f} ms  "
              f"p50 ratio step/run {statistics.median(step) / statistics.median(run):.3f} (target <= 0.333)")
        c.post("/envs/python/close", json={"session_id": sid})

        creates = []
        for _ in range(args.creates):
            time.sleep(0.5)  # the warm pool refills between creations
            started = time.perf_counter()
            sid = reset(c)
            creates.append(time.perf_counter() - started)
            c.post("/envs/python/close", json={"session_id": sid})
        print(f"session create (warm pool) p50 {pct(creates, .5):7.2f} ms  p99 {pct(creates, .99):7.2f} ms  "
              f"(target p50 <= 50 ms)")

        rate = asyncio.run(episodes(url, args.episodes, args.steps))
        print(f"{args.episodes} concurrent episodes: {rate:.1f} steps/s")

        held, each, sids = hold_idle(url, args.sessions, int(args.floor_gib * 2**30))
        alive = sum(c.post("/envs/python/step", json={"session_id": s, "action": {"code": "x = 1"}}).status_code
                    == 200 for s in sids)
        print(f"idle python sessions held: {held} (all answered a step after: {alive == held}), "
              f"{each / 2**20:.1f} MiB each (MemAvailable's fall), "
              f"{held * each / 2**30:.1f} GiB in all; at that cost this machine holds "
              f"~{int((available() + held * each - args.floor_gib * 2**30) / each)} (target >= 500)")


if __name__ == "__main__":
    main()
