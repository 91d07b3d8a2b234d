"""Probe items/s of a probe audit of the ``math`` verifier: through the engine and its worker pool (what
``reward-service audit probes`` and POST /v1/audit run) vs direct ``verifier.check`` calls one after another in this
process, both in this run on the same generated probes. Also the cost of ``correction: backward`` on top of a
plain verify, through the same engine.

Usage: python benchmarks/audit_throughput.py [--refs 60] [--per-family 3] [--workers 2]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA
from reward_service.resources.runtime import Runtime
from reward_service.settings import Settings
from verifiers.audit.attacks import TEXT_FAMILIES
from verifiers.audit.probes import generate, probe_audit
from verifiers.engine.registry import build_registry
from verifiers.types import VerifyItem


async def main(refs: int, per_family: int, workers: int) -> None:
    lines = (SHARED_DATA / "math" / "math500.test.jsonl").read_text().splitlines()[:refs]
    references = [json.loads(x)["answer"] for x in lines]
    probes = generate(references, TEXT_FAMILIES, per_family=per_family, seed=0)
    verifier = build_registry().get("math")
    options = verifier.parse_options({})
    verifier.check("\\boxed{1}", "1", options)  # warm imports and caches before timing

    started = time.perf_counter()
    for row, _, _, response in probes:
        verifier.check(response, references[row], options)
    direct = len(probes) / (time.perf_counter() - started)

    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(workers=workers, calibration_db=f"{scratch}/cal.sqlite3")
        async with Runtime.open(settings) as runtime:
            engine = runtime.engine
            await probe_audit(engine, "math", [{"reference": "1"}], per_family=1)  # warm the workers
            started = time.perf_counter()
            await probe_audit(engine, "math", [{"reference": r} for r in references], per_family=per_family, seed=0)
            through = len(probes) / (time.perf_counter() - started)

            plain = [VerifyItem("math", f"\\boxed{{{i % 7}}}", "3", {}) for i in range(2000)]
            corrected = [VerifyItem("math", f"\\boxed{{{i % 7}}}", "3",
                                    {"correction": "backward", "noise_rates": {"rho0": 0.05, "rho1": 0.1}})
                         for i in range(2000)]
            timings = {}
            for name, items in (("plain", plain), ("corrected", corrected), ("plain2", plain)):
                started = time.perf_counter()
                await engine.verify_many(items)
                timings[name] = len(items) / (time.perf_counter() - started)
    print(f"probes: {len(probes)} from {refs} MATH-500 references, {len(TEXT_FAMILIES)} families")
    print(f"direct verifier.check, 1 process: {direct:8.1f} probes/s")
    print(f"engine + pool ({workers} workers):     {through:8.1f} probes/s")
    print(f"ratio engine/direct: {through / direct:.2f}")
    plain_rate = max(timings["plain"], timings["plain2"])
    print(f"verify with correction=backward vs plain verify: {timings['corrected'] / plain_rate:.2f} "
          f"({timings['corrected']:.0f} vs {plain_rate:.0f} items/s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=60)
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.refs, args.per_family, args.workers))
