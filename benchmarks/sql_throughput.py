"""Seconds per hundred text-to-SQL point queries scored by the ``sql`` verifier through the real service (one batch
of N items over HTTP, each answer and its gold query run contained in the worker pool and compared), next to the same
queries run with Python's ``sqlite3`` directly (one connection, both queries, rows compared as sets: the usual
hand-written reward, no containment), both in this run.

The first service round meets every gold query for the first time; later rounds find them in the workers' gold
cache (a training run scores many rollouts per prompt, so the warm figure is the usual one).

Usage: python benchmarks/sql_throughput.py [--items 400] [--rounds 3] [--workers 2]
"""
from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import service
from tests.support.sql import build_databases


def workload(n: int) -> list[tuple[str, str]]:
    """(answer, gold) pairs of point queries: right answers written another way, and wrong ones."""
    rng = random.Random(7)
    pairs = []
    for i in range(n):
        key = rng.randint(1, 20_000)
        gold = f"SELECT label, price FROM item WHERE item_id = {key}"
        if i % 4 == 3:
            answer = f"SELECT label, price FROM item WHERE item_id = {key + 1}"
        else:
            answer = f"```sql\nSELECT t.label, t.price FROM item AS t WHERE t.item_id = {key};\n```"
        pairs.append((answer, gold))
    return pairs


def bare(db: Path, pairs: list[tuple[str, str]]) -> tuple[float, int]:
    conn = sqlite3.connect(db)
    started = time.perf_counter()
    right = 0
    for answer, gold in pairs:
        query = answer.removeprefix("```sql\n").removesuffix(";\n```")
        right += set(conn.execute(query).fetchall()) == set(conn.execute(gold).fetchall())
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed, right


def through_service(url: str, pairs: list[tuple[str, str]]) -> tuple[float, int]:
    items = [{"verifier": "sql", "response": answer, "reference": {"sql": gold, "database": "concert_singer"}}
             for answer, gold in pairs]
    with httpx.Client(base_url=url, timeout=300) as client:
        started = time.perf_counter()
        response = client.post("/v1/verify", json={"items": items})
        elapsed = time.perf_counter() - started
    response.raise_for_status()
    results = response.json()["results"]
    bad = [r for r in results if r["status"] != "ok"]
    assert not bad, bad[:3]
    return elapsed, sum(r["score"] == 1.0 for r in results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--items", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    pairs = workload(args.items)
    with tempfile.TemporaryDirectory() as tmp:
        root = build_databases(Path(tmp))
        db = root / "concert_singer" / "concert_singer.sqlite"
        bare_s = min(bare(db, pairs)[0] for _ in range(args.rounds))
        bare_right = bare(db, pairs)[1]
        env = {"REWARD_SERVICE_SQL_DATABASES_DIR": str(root), "REWARD_SERVICE_WORKERS": str(args.workers)}
        with service(env) as url:
            through_service(url, pairs[:8])  # first contact: HTTP client, worker imports
            cold_s, right = through_service(url, pairs)
            warm_s = min(through_service(url, pairs)[0] for _ in range(args.rounds))
    assert right == bare_right, (right, bare_right)
    per_100 = 100 / args.items
    print(f"{args.items} point queries in one batch, {args.workers} workers, {right} right "
          f"(same verdicts as bare sqlite3), best of {args.rounds} rounds")
    print(f"{'':>28} {'s per 100':>10} {'x bare':>8}")
    print(f"{'bare sqlite3 (no containment)':>28} {bare_s * per_100:>10.4f} {1:>8.1f}")
    print(f"{'service, cold gold cache':>28} {cold_s * per_100:>10.4f} {cold_s / bare_s:>8.1f}")
    print(f"{'service, warm gold cache':>28} {warm_s * per_100:>10.4f} {warm_s / bare_s:>8.1f}")


if __name__ == "__main__":
    main()
