"""Cost of the tool_calls verifier: items/s through POST /v1/verify beside exact_match in the same server run (the
ratio is tool_calls' cost in exact_match units), and in this process beside BFCL's own ast_checker on the same
candidates (when bfcl-eval is installed: ``pip install --no-deps bfcl-eval``).

Candidates are BFCL v4 non-live entries (../shared/data/tools) written as Hermes ``<tool_call>`` text and as Python
call text, right and wrong, each with its possible answer and tool specs as the reference.
Usage: python benchmarks/tool_calls.py [--seconds 5] [--batch 64] [--concurrency 4]
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA, drive, service
from tests.support.tool_calls import CATEGORIES, bfcl_oracle, candidates, decoded, load_entries, render
from verifiers.kinds.tool_calls import ToolCallsVerifier
from verifiers.types import VerifyItem


def tool_items() -> list[tuple[dict[str, Any], Any]]:
    """(request item, BFCL's decoded output) pairs, shuffled so every batch mixes categories and formats."""
    out = []
    for category in CATEGORIES:
        for c in candidates(load_entries(SHARED_DATA / "tools", category)):
            for how in ("hermes", "python"):
                item = {"verifier": "tool_calls", "response": render(c.calls, how),
                        "reference": {"calls": c.entry.ground_truth, "tools": c.entry.functions}}
                out.append((item, (c.entry, decoded(c.calls))))
    random.Random(0).shuffle(out)
    return out


def in_process(items: list[tuple[dict[str, Any], Any]], rounds: int) -> tuple[float, float | None]:
    verifier = ToolCallsVerifier()
    options = verifier.parse_options({})
    work = [VerifyItem("tool_calls", i["response"], i["reference"]) for i, _ in items]
    ours = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        for item in work:
            verifier.check(item.response, item.reference, options)
        ours = max(ours, len(work) / (time.perf_counter() - started))
    oracle = bfcl_oracle()
    if oracle is None:
        return ours, None
    theirs = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        for _, (entry, output) in items:
            oracle(entry, output, False)
        theirs = max(theirs, len(items) / (time.perf_counter() - started))
    return ours, theirs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    items = tool_items()
    ours, theirs = in_process(items, args.rounds)
    print(f"{len(items)} candidates from BFCL v4 non-live, Hermes and Python text")
    line = f"in process: tool_calls (parse + check) {ours:.0f} items/s"
    if theirs is not None:
        line += (f"   BFCL ast_checker (check only, calls already decoded) {theirs:.0f} items/s   "
                 f"ratio {ours / theirs:.2f}")
    print(line)
    batch = [i for i, _ in items[:args.batch]]
    exact = [{"verifier": "exact_match", "response": f"The answer is {i % 7}", "reference": str(i % 5)}
             for i in range(args.batch)]
    # exact_match on the very same items (their reference is not an answer it can use: it only reads the payload)
    # separates what the verifier costs from what carrying BFCL's tool specs in every item costs the edge.
    same_payload = [{**i, "verifier": "exact_match"} for i in batch]
    rates = {}
    with service() as url:
        asyncio.run(drive(url, "/v1/verify", {"items": batch}, seconds=1, concurrency=args.concurrency))
        for name, payload in (("tool_calls", batch), ("exact_match", exact), ("exact_match_same_payload",
                                                                               same_payload)):
            n = asyncio.run(drive(url, "/v1/verify", {"items": payload}, seconds=args.seconds,
                                  concurrency=args.concurrency))
            rates[name] = n * args.batch / args.seconds
    tool_rate = rates["tool_calls"]
    print(f"service, batches of {args.batch}, {args.concurrency} clients: tool_calls {tool_rate:.0f} items/s   "
          f"exact_match {rates['exact_match']:.0f} items/s (cost ratio {rates['exact_match'] / tool_rate:.2f})   "
          f"exact_match on the same items {rates['exact_match_same_payload']:.0f} items/s "
          f"(cost ratio {rates['exact_match_same_payload'] / tool_rate:.2f})")


if __name__ == "__main__":
    main()
