"""Items/s of ``math`` through the service when the rollout comes as a trajectory (``messages``: system, user, an
assistant turn with a tool call, its result, the final assistant turn) vs the same final answer as a plain
``response``, both in this run on the same GSM8K problems: the cost of validating a conversation at the edge and
carrying it to the worker.
Usage: python benchmarks/trajectories.py [--seconds 3] [--rounds 3] [--batch 64] [--concurrency 4]"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA, drive, service


def items(batch: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = [json.loads(line) for line in (SHARED_DATA / "math" / "gsm8k.test.jsonl").read_text().splitlines()[:batch]]
    plain, trajectories = [], []
    for row in rows:
        gold = row["answer"].split("####")[-1].strip().replace(",", "")
        final = f"Putting it together, the answer is $\\boxed{{{gold}}}$."
        plain.append({"verifier": "math", "reference": gold, "response": final})
        trajectories.append({"verifier": "math", "reference": gold, "messages": [
            {"role": "system", "content": "You are a careful assistant with a calculator tool."},
            {"role": "user", "content": row["question"]},
            {"role": "assistant", "content": "Let me compute the pieces.", "tool_calls": [
                {"id": "call_0", "type": "function",
                 "function": {"name": "calculator", "arguments": json.dumps({"expr": "16-3-4"})}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": "9"},
            {"role": "assistant", "content": final},
        ]})
    return plain, trajectories


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    plain, trajectories = items(args.batch)
    rates: dict[str, list[float]] = {"response": [], "messages": []}
    with service() as svc:
        asyncio.run(drive(svc, "/v1/verify", {"items": plain}, seconds=1, concurrency=args.concurrency))  # warm-up
        # Alternating rounds, each shape's median: other load on the machine falls on both alike.
        for _ in range(args.rounds):
            for name, batch in (("response", plain), ("messages", trajectories)):
                n = asyncio.run(drive(svc, "/v1/verify", {"items": batch}, seconds=args.seconds,
                                      concurrency=args.concurrency))
                rates[name].append(n * len(batch) / args.seconds)
    plain_rate, traj_rate = statistics.median(rates["response"]), statistics.median(rates["messages"])
    print(f"math through the service, batch {args.batch}, concurrency {args.concurrency}, "
          f"median of {args.rounds} alternating rounds of {args.seconds:g} s")
    print(f"{'as response':>14} {plain_rate:>8.0f} items/s")
    print(f"{'as messages':>14} {traj_rate:>8.0f} items/s   ratio {traj_rate / plain_rate:.2f}")

if __name__ == "__main__":
    main()
