"""Mixed clients against the real service: do normal clients keep their latency while one client sends
pathological math items?

Two phases with the same normal load (``--rounds`` pairs, alternating), each on a freshly started
``reward-service serve`` (``--workers`` verifier processes, so both start with cold verifier caches): normal
clients alone, then the same clients while a hostile client keeps sending batches of answers that hold a worker
until their deadline or that the cost guard must refuse.
For ``--seconds`` per phase each normal client works like a trainer: it sends ``--batch`` real ProcessBench rows (its
own slice of the file, the same in both phases; synthetic ``\\boxed{k}`` items when the data set is absent), waits
for the verdicts, then ``--think-ms`` (its training step; 0 saturates the service) before the next batch.
Prints the normal clients' p50/p99 request latency of both phases side by side with their ratio, the verdict
statuses, and checks by id that every item sent was answered exactly once. Acceptance: p99 ratio under 2.

Run: python benchmarks/mixed_clients.py [--workers 2] [--clients 3] [--seconds 30] [--batch 4] [--think-ms 100]
     [--rounds 2] [--hostile-mix all|runaway|guarded]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA, service

DATA = SHARED_DATA / "math" / "processbench_answers.jsonl"

# What a hostile (or unlucky) client sends. The first runs until its deadline: the final line of a real model answer
# (ProcessBench omnimath-120) that sends Math-Verify's sympy into a 1,999-term binomial sum. The rest are refused by
# the math verifier's cost guard (an unevaluated integral that sympy integrated by parts for 40+ s, functions of
# astronomically large numbers, huge factorials and towers).
RUNAWAY = 1  # the first RUNAWAY entries hold a worker until their deadline
PATHOLOGICAL: list[tuple[str, str, str]] = [
    ("math_verify", r"\boxed{\sum_{k=2}^{2000} (2^{k-1} - 1) \cdot \binom{2001-k}{1000}}", "2^{2000}"),
    ("math", r"\boxed{\int_{0}^{100} x^{50} e^{-x} \sin(x) dx}", "1"),
    ("math", r"\boxed{\sin(10^{10^{7}})}", "1"),
    ("math", r"\boxed{(10^{200})!}", "5"),
    ("math", r"\boxed{10^{10^{10^{10}}}}", r"\frac{1}{2}"),
    ("math", r"\boxed{2^{2^{2^{2^{2^{2}}}}}}", "7"),
]


def normal_rows(n: int) -> list[tuple[str, Any]]:
    """``n`` rows spread over the whole file (GSM8K, MATH, OlympiadBench and Omni-MATH answers)."""
    if DATA.exists():
        lines = DATA.read_text().splitlines()
        rows = [json.loads(line) for line in lines[::max(1, len(lines) // n)][:n]]
        return [(r["response"], r["reference"]) for r in rows]
    return [(f"so the answer is $\\boxed{{{k}}}$", str(k)) for k in range(n)]


class Ledger:
    """Ids sent and ids answered: no item may be lost or answered twice."""

    def __init__(self) -> None:
        self.sent: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.statuses: dict[str, Counter[str]] = {"alone": Counter(), "mixed": Counter(), "hostile": Counter()}
        self.failed_requests: Counter[str] = Counter()

    def problems(self) -> list[str]:
        lost = [i for i in self.sent if self.answered[i] == 0]
        twice = [i for i, c in self.answered.items() if c > 1]
        unknown = [i for i in self.answered if i not in self.sent]
        return ([f"{len(lost)} lost (e.g. {lost[:3]})"] if lost else []) + \
            ([f"{len(twice)} answered twice (e.g. {twice[:3]})"] if twice else []) + \
            ([f"{len(unknown)} answered but never sent"] if unknown else [])


async def post(client: httpx.AsyncClient, items: list[dict[str, Any]], kind: str, ledger: Ledger) -> float:
    ledger.sent.update(item["id"] for item in items)
    started = time.perf_counter()
    r = await client.post("/v1/verify", json={"items": items})
    elapsed = time.perf_counter() - started
    if r.status_code != 200:
        ledger.failed_requests[f"{kind} {r.status_code}"] += 1
        ledger.sent.subtract(item["id"] for item in items)
        return elapsed
    for result in r.json()["results"]:
        ledger.answered[result["id"]] += 1
        ledger.statuses[kind][result["status"]] += 1
    return elapsed


async def normal_client(url: str, name: str, rows: list[tuple[str, Any]], args: argparse.Namespace,
                        ledger: Ledger) -> list[float]:
    """Batches of this client's rows (cycling if the phase outlasts them) for ``--seconds``, one at a time."""
    latencies = []
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        stop = time.monotonic() + args.seconds
        r = 0
        while time.monotonic() < stop:
            items = [{"id": f"{name}-r{r}-i{k}", "verifier": "math", "response": resp, "reference": ref}
                     for k, (resp, ref) in enumerate(rows[(r * args.batch) % len(rows):][:args.batch])]
            latencies.append(await post(client, items, name.split("-")[0], ledger))
            r += 1
            await asyncio.sleep(args.think_ms / 1000)
    return latencies


async def hostile_client(url: str, args: argparse.Namespace, ledger: Ledger, stop: asyncio.Event, tag: str) -> int:
    sent = 0
    mix = {"all": PATHOLOGICAL, "runaway": PATHOLOGICAL[:RUNAWAY], "guarded": PATHOLOGICAL[RUNAWAY:]}[args.hostile_mix]
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        while not stop.is_set():
            items = [{"id": f"hostile-{tag}-r{sent}-i{k}", "verifier": verifier, "response": f"The answer is {answer}",
                      "reference": ref, "options": {"timeout_s": args.hostile_timeout}}
                     for k, (verifier, answer, ref) in
                     enumerate(mix[(sent * args.hostile_batch + j) % len(mix)] for j in range(args.hostile_batch))]
            await post(client, items, "hostile", ledger)
            sent += 1
    return sent


async def phase(url: str, args: argparse.Namespace, kind: str, ledger: Ledger, tag: str) -> tuple[list[float], int]:
    """One phase; ``tag`` keeps item ids unique across rounds."""
    per = len(rows := normal_rows(3400)) // args.clients
    hostile = kind == "mixed"
    stop = asyncio.Event()
    attacker = asyncio.create_task(hostile_client(url, args, ledger, stop, tag)) if hostile else None
    if attacker is not None:
        await asyncio.sleep(1.0)  # its first batch is on the workers before the normal clients start
    per_client = await asyncio.gather(*(
        normal_client(url, f"{kind}-{tag}-c{c}", rows[c * per:(c + 1) * per], args, ledger)
        for c in range(args.clients)))
    stop.set()
    batches = await attacker if attacker is not None else 0
    return [x for lat in per_client for x in lat], batches


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=3, help="Normal clients.")
    parser.add_argument("--seconds", type=float, default=30.0, help="Length of each phase.")
    parser.add_argument("--batch", type=int, default=4, help="Items per normal request.")
    parser.add_argument("--think-ms", type=float, default=100.0, help="Pause of a normal client between batches.")
    parser.add_argument("--rounds", type=int, default=2, help="Alone/mixed phase pairs, alternating.")
    parser.add_argument("--hostile-batch", type=int, default=6, help="Pathological items per hostile request.")
    parser.add_argument("--hostile-timeout", type=float, default=10.0, help="Deadline the hostile items ask for.")
    parser.add_argument("--hostile-mix", choices=("all", "runaway", "guarded"), default="all",
                        help="Pathological items sent: all, only those that run until their deadline, or only those "
                        "the cost guard refuses.")
    args = parser.parse_args()

    ledger = Ledger()
    env = {"REWARD_SERVICE_WORKERS": str(args.workers)}
    alone: list[float] = []
    mixed: list[float] = []
    batches = 0
    for n in range(args.rounds):  # alternating, so a change in the machine's other load hits both phases alike
        with service(env) as url:
            alone += asyncio.run(phase(url, args, "alone", ledger, str(n)))[0]
        with service(env) as url:
            latencies, sent = asyncio.run(phase(url, args, "mixed", ledger, str(n)))
            mixed += latencies
            batches += sent

    print(f"mixed clients: {args.workers} workers, {args.clients} normal clients sending {args.batch}-item requests "
          f"with {args.think_ms:g} ms between them for {args.seconds:g} s per phase x {args.rounds}, {len(alone)} "
          f"requests alone, {len(mixed)} with the hostile client "
          f"({'ProcessBench rows' if DATA.exists() else 'synthetic items'}); hostile client: "
          f"{batches} batches of {args.hostile_batch} pathological items ({args.hostile_mix}, deadline "
          f"{args.hostile_timeout:g} s)")
    print(f"{'normal request latency':<24}{'alone':>10}{'with hostile':>14}{'ratio':>8}")
    for label, q in (("p50", 50), ("p99", 99)):
        a, m = pct(alone, q), pct(mixed, q)
        print(f"{label:<24}{a * 1000:>8.0f}ms{m * 1000:>12.0f}ms{m / a:>8.2f}")
    for kind, counts in ledger.statuses.items():
        print(f"statuses {kind:<8}{dict(counts)}")
    if ledger.failed_requests:
        print(f"requests refused: {dict(ledger.failed_requests)}")
    problems = ledger.problems()
    print(f"ids: {sum(ledger.sent.values())} items sent, {sum(ledger.answered.values())} answered; "
          + ("; ".join(problems) if problems else "none lost, none answered twice"))
    ratio = pct(mixed, 99) / pct(alone, 99)
    print(f"acceptance (p99 ratio < 2): {'met' if ratio < 2 and not problems else 'NOT met'} ({ratio:.2f})")


if __name__ == "__main__":
    main()
