"""Lean proofs/s through the real service against the Kimina Lean server double modelling a REPL pool (``--repls``
REPLs shared by all requests, ``--check-ms`` per proof, ``--latency-ms`` per request): batches of 32 (the default)
vs one proof per request, both with the default 4 requests in flight, in this run. Also the verifier's own cost per
proof (lexing, statement comparison, static rules), measured in-process. No Lean runs: the pool is a model.
Usage: python benchmarks/lean_throughput.py [--proofs 256] [--repls 16] [--check-ms 50] [--latency-ms 20]"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import service
from tests.support.fakes.lean_server import FakeLeanServer, serve
from verifiers.kinds.lean.proof import build_snippet
from verifiers.kinds.lean.source import parse_reference
from verifiers.kinds.lean.verifier import DEFAULT_HEADER

REFERENCE = "theorem bench_sq (a b : ℝ) (h₀ : 0 < a) (h₁ : 0 < b) : (a + b) ^ 2 ≤ 2 * (a ^ 2 + b ^ 2) := by sorry"
CONFIGS = {"one proof per request": "1", "batches of 32 (default)": "32"}


def proof(i: int) -> str:
    return ("```lean4\nimport Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
            "open BigOperators Real Nat Topology Rat\n\n"
            f"/-- attempt {i} -/\n"
            "theorem bench_sq (a b : ℝ) (h₀ : 0 < a) (h₁ : 0 < b) : (a + b) ^ 2 ≤ 2 * (a ^ 2 + b ^ 2) := by\n"
            f"  have h : 0 ≤ (a - b) ^ 2 := sq_nonneg (a - b)  -- step {i}\n"
            "  nlinarith [sq_nonneg (a + b), mul_pos h₀ h₁]\n```")


def measure(url: str, n: int, salt: str) -> float:
    items = [{"id": f"{salt}{i}", "verifier": "lean", "response": proof(i), "reference": REFERENCE}
             for i in range(n)]
    with httpx.Client(base_url=url, timeout=900) as client:
        started = time.perf_counter()
        r = client.post("/v1/verify", json={"items": items})
        elapsed = time.perf_counter() - started
    r.raise_for_status()
    scores = {x["score"] for x in r.json()["results"]}
    assert scores == {1.0}, scores
    return n / elapsed


def static_cost(n: int) -> float:
    """Microseconds per proof of the verifier's own work before the server is asked."""
    statement = parse_reference(REFERENCE, DEFAULT_HEADER)
    codes = [proof(i).split("\n", 1)[1].rsplit("```", 1)[0] for i in range(n)]
    started = time.perf_counter()
    for code in codes:
        build_snippet(code, statement, allow_search_tactics=False)
    return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--proofs", type=int, default=256)
    ap.add_argument("--repls", type=int, default=16)
    ap.add_argument("--check-ms", type=float, default=50.0)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    args = ap.parse_args()
    rates = {}
    fake = FakeLeanServer(latency_s=args.latency_ms / 1000, repls=args.repls, check_s=args.check_ms / 1000)
    with serve(fake):
        for i, (label, batch) in enumerate(CONFIGS.items()):
            env = {"REWARD_SERVICE_LEAN_SERVER_URL": fake.url, "REWARD_SERVICE_LEAN_MAX_BATCH": batch,
                   "REWARD_SERVICE_WORKERS": "1"}
            with service(env) as url:
                measure(url, 8, f"w{i}-")  # warm-up: connections, imports
                before = fake.calls
                rates[label] = measure(url, args.proofs, f"r{i}-")
                calls = fake.calls - before
            print(f"{label:>26}: {rates[label]:8.1f} proofs/s ({calls} requests for {args.proofs} proofs)")
    floor = args.repls / (args.check_ms / 1000)
    print(f"model: {args.repls} REPLs x {args.check_ms:g} ms/proof (at most {floor:.0f} proofs/s), "
          f"{args.latency_ms:g} ms/request")
    baseline = rates["one proof per request"]
    for label, rate in rates.items():
        print(f"{label:>26}: ratio {rate / baseline:6.2f}x")
    print(f"static checks: {static_cost(2000):.0f} us per proof (lexing, statement, rules; in-process)")


if __name__ == "__main__":
    main()
