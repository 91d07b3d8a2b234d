"""BFCL multi-turn episodes: episodes/s of the ``bfcl_multi_turn`` verifier in this process beside bfcl-eval's own
``multi_turn_checker`` on the same episodes (its executor and checks; it is handed calls already decoded), and
steps/s of live ``bfcl`` sessions on a real server (reset, steps, end of turns, each session's worker process
included) beside bfcl-eval's executor running the same steps in this process. Agreement with bfcl-eval's verdicts is
printed for both.

Episodes are built from BFCL's ground truth and plausible mistakes (tests/support/bfcl_episodes.py).
Usage: python benchmarks/bfcl_episodes.py [--per-category 5] [--live 40] [--concurrency 4]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import service
from tests.support.bfcl_episodes import EpisodeCase, Oracle, action, as_inference, bfcl_decoded, cases, messages
from verifiers.kinds.bfcl.source import CATEGORIES
from verifiers.kinds.bfcl.verifier import BfclMultiTurnVerifier, judge_trajectory

OPTIONS = BfclMultiTurnVerifier().parse_options({})


def in_process(episodes: list[EpisodeCase], oracle: Oracle) -> None:
    trajectories = [messages(c) for c in episodes]
    started = time.perf_counter()
    ours = [judge_trajectory(m, {"task_id": c.task.id}, OPTIONS) for m, c in zip(trajectories, episodes)]
    ours_rate = len(episodes) / (time.perf_counter() - started)
    started = time.perf_counter()
    theirs = [oracle.verdict(c, per_turn=False) for c in episodes]
    theirs_rate = len(episodes) / (time.perf_counter() - started)
    agree = sum((v.score == 1.0, v.details["error_type"]) == (w.valid, w.error_type) for v, w in zip(ours, theirs))
    print(f"in process, {len(episodes)} episodes: bfcl_multi_turn {ours_rate:.1f} episodes/s (parse, replay, "
          f"checks)   bfcl-eval multi_turn_checker {theirs_rate:.1f} episodes/s (decoded calls)   "
          f"ratio {ours_rate / theirs_rate:.2f}   agreement {agree}/{len(episodes)}")


def bfcl_steps(episodes: list[EpisodeCase]) -> float:
    """bfcl-eval's executor (``execute_multi_turn_func_call``) on the same steps, in this process: steps/s."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    steps = 0
    started = time.perf_counter()
    for n, case in enumerate(episodes):
        name = f"bench{n}"
        for turn in bfcl_decoded(case):
            for calls in turn:
                multi_turn_utils.execute_multi_turn_func_call(
                    calls, case.task.initial_config, case.task.involved_classes, name, case.task.id,
                    long_context=case.task.long_context, is_evaL_run=True)
                steps += 1
        for key in [k for k in vars(multi_turn_utils) if k.startswith(name + "_")]:
            delattr(multi_turn_utils, key)
    return steps / (time.perf_counter() - started)


async def play(client: httpx.AsyncClient, case: EpisodeCase, latencies: dict[str, list[float]]
               ) -> tuple[int, dict[str, Any]]:
    started = time.perf_counter()
    r = await client.post("/envs/bfcl/reset", json={"task_id": case.task.id})
    latencies["reset"].append(time.perf_counter() - started)
    r.raise_for_status()
    sid = r.json()["observation"]["session_id"]
    out: dict[str, Any] = {}
    steps = n = 0
    for turn in case.turns:
        for s in turn:
            n += 1
            started = time.perf_counter()
            r = await client.post("/envs/bfcl/step", json={"session_id": sid, "action": action(s, case.text, n)})
            latencies["step"].append(time.perf_counter() - started)
            r.raise_for_status()
            out = r.json()
            steps += 1
            if out["done"] or out["observation"]["status"] != "results":
                break
        if out.get("done"):
            break
    await client.post("/envs/bfcl/close", json={"session_id": sid})
    return steps, out


async def live(url: str, episodes: list[EpisodeCase], concurrency: int, latencies: dict[str, list[float]]
               ) -> tuple[float, float, list[Any]]:
    queue: asyncio.Queue[EpisodeCase] = asyncio.Queue()
    for c in episodes:
        queue.put_nowait(c)
    outcomes: list[Any] = []
    total = 0

    async def worker() -> None:
        nonlocal total
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            while not queue.empty():
                case = queue.get_nowait()
                steps, out = await play(client, case, latencies)
                total += steps
                outcomes.append((case, out))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return total / elapsed, len(episodes) / elapsed, outcomes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--per-category", type=int, default=5)
    ap.add_argument("--live", type=int, default=40, help="episodes played live")
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    episodes = cases(CATEGORIES, per_category=args.per_category, seed=7)
    oracle = Oracle()
    in_process(episodes, oracle)
    played = [c for c in episodes if c.mutation != "missing_last_turn"][::max(1, len(episodes) // args.live)]
    played = played[:args.live]
    inference = [as_inference(c) for c in played]
    theirs = bfcl_steps(inference)
    latencies: dict[str, list[float]] = {"reset": [], "step": []}
    with service() as url:
        asyncio.run(live(url, played[:2], 1, {"reset": [], "step": []}))  # warm-up
        steps_rate, episode_rate, outcomes = asyncio.run(live(url, played, args.concurrency, latencies))
    agree = sum((out["reward"] == 1.0) == oracle.verdict(as_inference(c), per_turn=False).valid
                for c, out in outcomes)
    print(f"live bfcl sessions, {len(played)} episodes, {args.concurrency} clients: {steps_rate:.1f} steps/s "
          f"({episode_rate:.2f} episodes/s, a worker process per session)   bfcl-eval executor in process "
          f"{theirs:.0f} steps/s   ratio {steps_rate / theirs:.3f}   agreement {agree}/{len(played)}")
    print(f"median latency: reset {statistics.median(latencies['reset']) * 1000:.0f} ms (takes a worker process "
          f"started ahead, or starts one), step {statistics.median(latencies['step']) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
