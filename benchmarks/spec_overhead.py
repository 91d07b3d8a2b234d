"""Reward-spec composition cost: items/s of a 3-component spec (format gate + exact match + length) through
POST /v1/verify, vs the same three checks sent as three separate items in the same server run, as a ratio.
Usage: python benchmarks/spec_overhead.py [--seconds 5] [--batch 64]"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import drive, service

SPEC = {"components": [
    {"name": "format", "verifier": "format", "options": {"template": "think"}, "gate": True, "use_reference": False},
    {"name": "correct", "verifier": "exact_match", "reference_key": "answer"},
    {"name": "length", "verifier": "length", "weight": 0.5, "use_reference": False,
     "options": {"mode": "dapo", "max_length": 400, "cache_length": 100}},
]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    responses = [f"<think>step {i}</think> {i % 7}" for i in range(args.batch)]
    spec_items = [{"verifier": "spec", "response": r, "reference": {"answer": str(i % 5)}, "options": SPEC}
                  for i, r in enumerate(responses)]
    flat_items = []
    for i, r in enumerate(responses):
        flat_items += [
            {"verifier": "format", "response": r, "options": {"template": "think"}},
            {"verifier": "exact_match", "response": r, "reference": str(i % 5)},
            {"verifier": "length", "response": r, "options": {"mode": "dapo", "max_length": 400, "cache_length": 100}},
        ]
    with service() as url:
        asyncio.run(drive(url, "/v1/verify", {"items": spec_items}, seconds=1, concurrency=args.concurrency))
        n_spec = asyncio.run(drive(url, "/v1/verify", {"items": spec_items}, seconds=args.seconds,
                                   concurrency=args.concurrency))
        n_flat = asyncio.run(drive(url, "/v1/verify", {"items": flat_items}, seconds=args.seconds,
                                   concurrency=args.concurrency))
    spec_rate = n_spec * args.batch / args.seconds
    flat_rate = n_flat * args.batch / args.seconds  # rollouts/s: each rollout is three flat items
    print(f"spec rollouts/s: {spec_rate:.0f}   three separate items per rollout: {flat_rate:.0f}   "
          f"ratio spec/separate: {spec_rate / flat_rate:.2f}")


if __name__ == "__main__":
    main()
