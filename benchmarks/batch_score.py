"""Batch scoring throughput: rows/s for 10k GSM8K-style rollouts, embedded (in-process engine) vs through a
server (the same command's ``--url`` path), in the same run; printed as a ratio.

    python benchmarks/batch_score.py [--rows 10000] [--workers 2] [--verifier math]

Rows come from ../shared/data/math/gsm8k.test.jsonl, repeated with unique ids; the responses are short rollouts
ending in a boxed answer, one in three of them wrong. Start-up (worker pool, server) is outside the timed part.
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

from benchmarks._common import SHARED_DATA, service
from reward_service.batch.command import Job, Tally, run_job
from reward_service.batch.rows import RowSpec
from reward_service.batch.scorers import EmbeddedScorer, RemoteScorer


def make_rows(path: Path, n: int, verifier: str) -> None:
    source = [json.loads(line) for line in open(SHARED_DATA / "math" / "gsm8k.test.jsonl")]
    with open(path, "w") as f:
        for i in range(n):
            record = source[i % len(source)]
            gold = record["answer"].split("####")[-1].strip()
            final = gold if i % 3 else f"{gold}1"
            if verifier == "exact_match":
                response = final
            else:
                work = record["answer"].split("####")[0].strip().replace("<<", "").replace(">>", " ")
                response = f"{work}\nSo the answer is $\\boxed{{{final}}}$."
            f.write(json.dumps({"id": i, "prompt": record["question"], "response": response, "reference": gold}) + "\n")


async def timed(job: Job, scorer) -> tuple[float, Tally]:
    tally = Tally()
    started = time.perf_counter()
    await run_job(job, scorer, tally)
    return time.perf_counter() - started, tally


async def embedded(job: Job, workers: int) -> tuple[float, Tally]:
    from reward_service.resources.runtime import Runtime
    from reward_service.settings import Settings

    async with Runtime.open(Settings(workers=workers, log_level="WARNING")) as runtime:
        return await timed(job, EmbeddedScorer(runtime.engine))


async def remote(job: Job, url: str) -> tuple[float, Tally]:
    from reward_client import AsyncRewardClient

    async with AsyncRewardClient(url, chunk_size=job.chunk_size, max_concurrency=job.concurrency) as client:
        return await timed(job, RemoteScorer(client))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--verifier", default=None, help="default: math if registered, else exact_match")
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    from verifiers.engine.registry import build_registry

    verifier = args.verifier or ("math" if "math" in build_registry() else "exact_match")
    spec = RowSpec(verifier=verifier)
    with tempfile.TemporaryDirectory() as tmp:
        inp = Path(tmp) / "rollouts.jsonl"
        make_rows(inp, args.rows, verifier)
        job_e = Job(inp, Path(tmp) / "embedded.jsonl", spec, args.chunk_size, args.concurrency)
        t_e, tally_e = asyncio.run(embedded(job_e, args.workers))
        env = {"REWARD_SERVICE_WORKERS": str(args.workers)}
        with service(env) as url:
            job_r = Job(inp, Path(tmp) / "remote.jsonl", spec, args.chunk_size, args.concurrency)
            t_r, tally_r = asyncio.run(remote(job_r, url))
    assert tally_e.statuses == tally_r.statuses, (tally_e.statuses, tally_r.statuses)
    rate_e, rate_r = args.rows / t_e, args.rows / t_r
    print(f"verifier={verifier} rows={args.rows} workers={args.workers} chunk={args.chunk_size} "
          f"concurrency={args.concurrency}")
    print(f"statuses: {dict(tally_e.statuses)}  mean score: {tally_e.score_sum / max(tally_e.scored, 1):.4f}")
    print(f"embedded:       {rate_e:10.1f} rows/s  ({t_e:.2f} s)")
    print(f"through server: {rate_r:10.1f} rows/s  ({t_r:.2f} s)")
    print(f"ratio server/embedded: {rate_r / rate_e:.3f}")


if __name__ == "__main__":
    main()
