"""Cost of the tool_calls verifier: items/s through POST /v1/verify beside exact_match in the same server run (the
ratio is tool_calls' cost in exact_match units), and in this process beside BFCL's own ast_checker on the same
candidates (when bfcl-eval is installed: ``pip install --no-deps bfcl-eval``).

Candidates are BFCL v4 non-live entries (../shared/data/tools), right and wrong, each sent as a trainer sends it: the
possible answer as the reference and the entry's functions as the item's OpenAI ``tools``, the output as Hermes
``<tool_call>`` text, as Python call text (both in ``response``) or as a vLLM assistant message with structured
``tool_calls`` (in ``messages``), a third of each. The service figures alternate tool_calls and exact_match batches
(A B A B, ``--rounds`` pairs) and quote the median of the pairs' ratios, so a shared machine's drift cancels; each
request body is encoded once, so the figure is the service's cost, not the load generator's.
Usage: python benchmarks/tool_calls.py [--seconds 2] [--rounds 3] [--batch 64] [--concurrency 4]
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA, ServiceUrl, cpu_seconds, drive, service
from tests.support.tool_calls import CATEGORIES, as_messages, bfcl_oracle, candidates, decoded, load_entries, render
from verifiers.conversation import bound, final_text
from verifiers.kinds.tool_calls import ToolCallsVerifier
from verifiers.types import VerifyItem

SHAPES = ("hermes", "python", "messages")


def tool_items(tools_in: str = "item") -> list[tuple[dict[str, Any], Any]]:
    """(request item, BFCL's decoded output) pairs, shuffled so every batch mixes categories and shapes.
    ``tools_in="reference"``: the specs travel in the reference (``{"calls", "tools"}``) instead of the item."""
    out = []
    rng = random.Random(0)
    for category in CATEGORIES:
        for c in candidates(load_entries(SHARED_DATA / "tools", category)):
            how = rng.choice(SHAPES)
            tools = [{"type": "function", "function": f} for f in c.entry.functions]
            item: dict[str, Any] = {"verifier": "tool_calls", "reference": c.entry.ground_truth, "tools": tools}
            if tools_in == "reference":
                item = {"verifier": "tool_calls", "reference": {"calls": c.entry.ground_truth, "tools": tools}}
            if how == "messages":
                item["messages"] = as_messages(c.entry, c.calls)
            else:
                item["response"] = render(c.calls, how)
            out.append((item, (c.entry, decoded(c.calls))))
    random.Random(0).shuffle(out)
    return out


def in_process(items: list[tuple[dict[str, Any], Any]], rounds: int) -> tuple[float, float | None]:
    verifier = ToolCallsVerifier()
    options = verifier.parse_options({})
    work = [VerifyItem("tool_calls", i.get("response") or final_text(i.get("messages") or []), i["reference"],
                       messages=i.get("messages"), tools=i.get("tools")) for i, _ in items]
    ours = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        for item in work:
            with bound(item.messages, item.tools):
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


def rate(url: ServiceUrl, items: list[dict[str, Any]], args: argparse.Namespace) -> tuple[float, float]:
    """(items/s, the server's CPU microseconds per item) over one stretch of ``args.seconds``."""
    cpu = cpu_seconds(url.pid)
    n = asyncio.run(drive(url, "/v1/verify", {"items": items}, seconds=args.seconds, concurrency=args.concurrency,
                          encode_once=True))
    return n * len(items) / args.seconds, (cpu_seconds(url.pid) - cpu) / max(1, n * len(items)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=2.0, help="Each timed stretch.")
    ap.add_argument("--rounds", type=int, default=3, help="A B pairs through the service (and in-process rounds).")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--tools-in", choices=("item", "reference"), default="item",
                    help="Where the tool specs travel: the item's tools (default) or the reference.")
    args = ap.parse_args()
    items = tool_items(args.tools_in)
    ours, theirs = in_process(items, args.rounds)
    in_messages = sum("messages" in i for i, _ in items)
    print(f"{len(items)} candidates from BFCL v4 non-live, tools in the {args.tools_in}: "
          f"{len(items) - in_messages} as text (Hermes or Python calls), {in_messages} as messages with tool_calls")
    line = f"in process: tool_calls (parse + check) {ours:.0f} items/s"
    if theirs is not None:
        line += (f"   BFCL ast_checker (check only, calls already decoded) {theirs:.0f} items/s   "
                 f"ratio {ours / theirs:.2f}")
    print(line)
    batch = [i for i, _ in items[:args.batch]]
    exact = [{"verifier": "exact_match", "response": f"The answer is {i % 7}", "reference": str(i % 5)}
             for i in range(args.batch)]
    # exact_match on the very same items (its reference is not an answer it can use: it only reads the payload)
    # separates what the verifier costs from what carrying BFCL's tool specs in every item costs the edge.
    same_payload = [{**i, "verifier": "exact_match"} for i in batch]
    runs: dict[str, list[tuple[float, float]]] = {"tool_calls": [], "exact_match": [], "same_payload": []}
    with service() as url:
        rate(url, batch, argparse.Namespace(**{**vars(args), "seconds": 1.0}))  # warm-up
        for _ in range(args.rounds):
            for name, payload in (("tool_calls", batch), ("exact_match", exact), ("same_payload", same_payload)):
                runs[name].append(rate(url, payload, args))

    def ratio(name: str, k: int) -> float:  # per pair: tool_calls' cost over the other's
        pairs = zip(runs["tool_calls"], runs[name])
        return statistics.median(o[0] / t[0] if k == 0 else t[1] / o[1] for t, o in pairs)

    def median(name: str, k: int) -> float:
        return statistics.median(r[k] for r in runs[name])

    print(f"service, batches of {args.batch}, {args.concurrency} clients, {args.rounds} rounds of {args.seconds:g} s "
          f"alternating: tool_calls {median('tool_calls', 0):.0f} items/s, exact_match "
          f"{median('exact_match', 0):.0f} items/s: cost ratio {ratio('exact_match', 0):.2f} (pairs "
          f"{', '.join(f'{e[0] / t[0]:.2f}' for t, e in zip(runs['tool_calls'], runs['exact_match']))}); "
          f"exact_match on the same items {median('same_payload', 0):.0f} items/s: cost ratio "
          f"{ratio('same_payload', 0):.2f}")
    print(f"server CPU per item: tool_calls {median('tool_calls', 1):.0f} us, exact_match "
          f"{median('exact_match', 1):.0f} us (ratio {ratio('exact_match', 1):.2f}), exact_match on the same items "
          f"{median('same_payload', 1):.0f} us (ratio {ratio('same_payload', 1):.2f})")


if __name__ == "__main__":
    main()
