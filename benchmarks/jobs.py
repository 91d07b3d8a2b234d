"""Jobs and streaming against the real service: how soon does a trainer see its first and its median verdict of a
4,096-item mixed batch, and what does the job path cost per item beside ``/v1/verify``?

One ``reward-service serve`` (``--workers`` verifier processes, the job store on, in a temporary file). The batch:
real ProcessBench answers for the ``math`` verifier (worker pool; synthetic ``\\boxed{k}`` items when the data set is
absent), ``exact_match`` items (answered inline) and, unless ``--no-code``, small ``code`` items (sandbox), shuffled
with a fixed seed. Three ways to get its verdicts, run in turn for ``--rounds`` rounds (A B C A B C ...):

- ``verify``: POST /v1/verify, every verdict arrives with the last;
- ``verify-stream``: the same POST with ``Accept: application/x-ndjson``, verdicts in the order decided;
- ``job``: POST /v1/jobs, then GET /v1/jobs/{id}/results (NDJSON), timed from the POST.

Prints, per way, the median over rounds of the time to the first verdict, to the median (2,048th) verdict and to
the last, and their ratio against ``verify``; the same for a second, inline-only batch (4,096 ``exact_match``
items, where the scoring itself costs least).

Then the job path's overhead per item beside ``/v1/verify``, measured so that a loaded machine moves it little:
``--pairs`` pairs of ``--small``-item batches (mixed, then inline-only), the two ways alternated A B B A, and per way
the median of the wall time per item and of the server's CPU time per item, read from /proc (its own process, where
the job path's work is done, and with its worker processes). CPU time is what the figure should be read from: wall
time on a shared machine moves with the other load by more than the difference measured. Target <= 10 %.

Run: python benchmarks/jobs.py [--workers 2] [--rounds 3] [--items 4096] [--pairs 10] [--small 2048]
     [--no-code] [--only latency|overhead]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA, ServiceUrl, service

DATA = SHARED_DATA / "math" / "processbench_answers.jsonl"
NDJSON = "application/x-ndjson"


def mixed_batch(n: int, code: bool) -> list[dict[str, Any]]:
    rng = random.Random(7)
    rows: list[tuple[str, Any]]
    if DATA.exists():
        rows = [(r["response"], r["reference"]) for r in map(json.loads, DATA.read_text().splitlines())]
    else:
        rows = [(f"so the answer is $\\boxed{{{k}}}$", str(k)) for k in range(1000)]
    items: list[dict[str, Any]] = []
    n_code = n // 32 if code else 0
    n_math = (n - n_code) * 2 // 3
    for i in range(n_math):
        response, reference = rows[i % len(rows)]
        items.append({"verifier": "math", "response": response, "reference": reference})
    for i in range(n_code):
        items.append({"verifier": "code", "response": f"print(int(input()) * {i % 7})",
                      "reference": {"cases": [{"input": "6", "output": str(6 * (i % 7))}]}})
    while len(items) < n:
        k = len(items)
        items.append({"verifier": "exact_match", "response": str(k % 5), "reference": str(k % 3)})
    rng.shuffle(items)
    return [{**item, "id": str(i)} for i, item in enumerate(items)]


def marks(times: list[float]) -> tuple[float, float, float]:
    """(first, median, last) of the arrival times of each verdict."""
    times = sorted(times)
    return times[0], times[len(times) // 2], times[-1]


def via_verify(c: httpx.Client, items: list[dict[str, Any]]) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    r = c.post("/v1/verify", json={"items": items})
    r.raise_for_status()
    t = time.perf_counter() - t0
    assert len(r.json()["results"]) == len(items)
    return t, t, t


def via_stream(c: httpx.Client, items: list[dict[str, Any]]) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    times: list[float] = []
    with c.stream("POST", "/v1/verify", json={"items": items}, headers={"Accept": NDJSON}) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line and '"index"' in line[:12]:
                times.append(time.perf_counter() - t0)
    assert len(times) == len(items)
    return marks(times)


def via_job(c: httpx.Client, items: list[dict[str, Any]]) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    r = c.post("/v1/jobs", json={"items": items})
    r.raise_for_status()
    job = r.json()["id"]
    times: list[float] = []
    with c.stream("GET", f"/v1/jobs/{job}/results") as s:
        s.raise_for_status()
        for line in s.iter_lines():
            if line:
                times.append(time.perf_counter() - t0)
    assert len(times) == len(items)
    return marks(times)


WAYS = {"verify": via_verify, "verify-stream": via_stream, "job": via_job}


def run(url: str, items: list[dict[str, Any]], rounds: int, title: str) -> None:
    got: dict[str, list[tuple[float, float, float]]] = {w: [] for w in WAYS}
    with httpx.Client(base_url=url, timeout=600) as c:
        via_verify(c, items[:256])  # warm the workers and the sandbox
        for _ in range(rounds):
            for way, fn in WAYS.items():
                got[way].append(fn(c, items))
    med = {w: tuple(statistics.median(x[k] for x in got[w]) for k in range(3)) for w in WAYS}
    base = med["verify"]
    print(f"\n{title}: {len(items)} items, median of {rounds} rounds (A B C alternated)")
    print(f"{'way':<14} {'first s':>9} {'median s':>9} {'last s':>9} {'first/verify':>13} {'median/verify':>14}")
    for way, (first, middle, last) in med.items():
        print(f"{way:<14} {first:9.3f} {middle:9.3f} {last:9.3f} {first / base[0]:13.3f} {middle / base[1]:14.3f}")
    overhead = med["job"][2] - base[2]
    print(f"job path overhead: {overhead / len(items) * 1e6:+.1f} us per item, {overhead / base[2] * 100:+.1f} % of "
          f"/v1/verify's {base[2]:.3f} s (target <= 10 %)")


def cpu_ns(pids: list[int]) -> int:
    """Nanoseconds on a CPU of every thread of ``pids``, from /proc/<pid>/task/*/schedstat: exact to the
    nanosecond where /proc/<pid>/stat counts 10 ms ticks, and what a request costs the server does not move with
    the load the way its wall time does."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def overhead(url: ServiceUrl, items: list[dict[str, Any]], pairs: int, title: str) -> None:
    """The job path's cost per item beside /v1/verify, robust to a loaded machine: small batches, the two ways
    alternated ``pairs`` times (A B B A, so a drift in load falls on both), medians of the wall time and of the
    server's CPU time per item: its own process (the event loop, where the job path's work is) and with its worker
    processes."""
    ways = {"verify": via_verify, "job": via_job}
    wall: dict[str, list[float]] = {w: [] for w in ways}
    own: dict[str, list[float]] = {w: [] for w in ways}
    total: dict[str, list[float]] = {w: [] for w in ways}
    n = len(items)
    with httpx.Client(base_url=url, timeout=600) as c:
        for way in ways.values():
            way(c, items)  # warm both paths
        for k in range(pairs):
            for way in (("verify", "job") if k % 2 == 0 else ("job", "verify")):
                workers = children(url.pid)
                cpu0, all0, t0 = cpu_ns([url.pid]), cpu_ns([url.pid, *workers]), time.perf_counter()
                ways[way](c, items)
                wall[way].append((time.perf_counter() - t0) / n * 1e6)
                own[way].append((cpu_ns([url.pid]) - cpu0) / n / 1e3)
                total[way].append((cpu_ns([url.pid, *workers]) - all0) / n / 1e3)
    print(f"\n{title}: {n} items per batch, {pairs} pairs (A B B A ...), medians per item; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'way':<8} {'wall us':>9} {'server CPU us':>14} {'+ workers us':>13}")
    med = {w: (statistics.median(wall[w]), statistics.median(own[w]), statistics.median(total[w])) for w in ways}
    for way, (w, o, t) in med.items():
        print(f"{way:<8} {w:9.1f} {o:14.1f} {t:13.1f}")
    (vw, vo, vt), (jw, jo, jt) = med["verify"], med["job"]
    print(f"job path overhead per item: wall {jw - vw:+.1f} us ({(jw - vw) / vw * 100:+.1f} %), server CPU "
          f"{jo - vo:+.1f} us ({(jo - vo) / vo * 100:+.1f} %), with workers {jt - vt:+.1f} us "
          f"({(jt - vt) / vt * 100:+.1f} %) (target <= 10 %)")


def inline_batch(n: int) -> list[dict[str, Any]]:
    return [{"id": str(i), "verifier": "exact_match", "response": str(i % 5), "reference": str(i % 3)}
            for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the time-to-verdict run")
    ap.add_argument("--items", type=int, default=4096, help="items of the time-to-verdict batches")
    ap.add_argument("--pairs", type=int, default=10, help="verify/job pairs of the overhead run")
    ap.add_argument("--small", type=int, default=2048, help="items of the overhead run's batches")
    ap.add_argument("--no-code", action="store_true")
    ap.add_argument("--only", choices=["latency", "overhead"], help="run one of the two parts")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"REWARD_SERVICE_WORKERS": str(args.workers), "REWARD_SERVICE_JOBS_STORE": f"{tmp}/jobs.sqlite3",
               "REWARD_SERVICE_SANDBOX_BACKEND": "none" if args.no_code else "bwrap"}
        with service(env) as url:
            if args.only != "overhead":
                run(url, mixed_batch(args.items, not args.no_code), args.rounds, "mixed batch")
                run(url, inline_batch(args.items), args.rounds, "inline-only batch")
            if args.only != "latency":
                overhead(url, mixed_batch(args.small, not args.no_code), args.pairs, "overhead, mixed batch")
                overhead(url, inline_batch(args.small), args.pairs, "overhead, inline-only batch")


if __name__ == "__main__":
    main()
