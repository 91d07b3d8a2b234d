"""Items/s through the full stack (HTTP, validation, admission, worker pool, verdicts) vs a bare FastAPI echo
endpoint, both measured in this run. Usage: python benchmarks/http_overhead.py [--seconds 5] [--concurrency 8]"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import drive, service, uvicorn_app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    rows = []
    with service() as svc, uvicorn_app("benchmarks._echo_app:app") as echo:
        for batch in (1, 64):
            items = [{"id": str(i), "verifier": "exact_match", "response": f" answer {i} ", "reference": f"answer {i}"}
                     for i in range(batch)]
            payload = {"items": items}
            asyncio.run(drive(svc, "/v1/verify", payload, seconds=1, concurrency=args.concurrency))  # warm-up
            n_svc = asyncio.run(drive(svc, "/v1/verify", payload, seconds=args.seconds, concurrency=args.concurrency))
            n_echo = asyncio.run(drive(echo, "/echo", payload, seconds=args.seconds, concurrency=args.concurrency))
            svc_rate = n_svc * batch / args.seconds
            echo_rate = n_echo * batch / args.seconds
            rows.append((batch, svc_rate, echo_rate))
    print(f"{'batch':>5} {'service items/s':>16} {'bare echo items/s':>18} {'ratio':>7}")
    for batch, s, e in rows:
        print(f"{batch:>5} {s:>16.0f} {e:>18.0f} {s / e:>7.2f}")


if __name__ == "__main__":
    main()
