"""Cost of the rule-reward kinds: items/s of each through POST /v1/verify beside exact_match in the same server run
(the ratio is the kind's cost in exact_match units), on items written the way the models they serve answer
(tests/support/rules.py), and each kind's check alone in this process.

Usage: python benchmarks/rule_rewards.py [--seconds 4] [--batch 64] [--concurrency 4]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import drive, service
from tests.support.rules import KINDS, rule_items
from verifiers.kinds.rules import VERIFIERS


def in_process(n: int) -> dict[str, float]:
    by_name = {v.name: v for v in VERIFIERS}
    rates = {}
    for kind in KINDS:
        verifier = by_name[kind]
        items = rule_items(kind, n)
        options = [verifier.parse_options(i.get("options")) for i in items]
        verifier.warm_up()
        for item, opts in zip(items[:8], options[:8]):  # imports, caches
            verifier.check(item["response"], item["reference"], opts)
        started = time.perf_counter()
        for item, opts in zip(items, options):
            verifier.check(item["response"], item["reference"], opts)
        rates[kind] = n / (time.perf_counter() - started)
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    local = in_process(500)
    print("in process, one check at a time: " + "   ".join(f"{k} {v:.0f}/s" for k, v in local.items()))
    exact = [{"verifier": "exact_match", "response": f"The answer is {i % 7}", "reference": str(i % 5)}
             for i in range(args.batch)]
    payloads = {"exact_match": exact, **{k: rule_items(k, args.batch) for k in KINDS}}
    rates: dict[str, float] = {}
    with service() as url:
        for payload in payloads.values():  # warm every kind's imports in the workers
            asyncio.run(drive(url, "/v1/verify", {"items": payload}, seconds=0.5, concurrency=args.concurrency))
        # exact_match is measured before and after the kinds, so a drift of the machine shows in the figures.
        for name in ["exact_match", *KINDS, "exact_match"]:
            n = asyncio.run(drive(url, "/v1/verify", {"items": payloads[name]}, seconds=args.seconds,
                                  concurrency=args.concurrency))
            rate = n * args.batch / args.seconds
            rates[name] = rate if name not in rates else (rates[name] + rate) / 2
    base = rates["exact_match"]
    print(f"service, batches of {args.batch}, {args.concurrency} clients: exact_match {base:.0f} items/s")
    for kind in KINDS:
        print(f"  {kind:20s} {rates[kind]:7.0f} items/s   cost ratio {base / rates[kind]:.2f}x exact_match")


if __name__ == "__main__":
    main()
