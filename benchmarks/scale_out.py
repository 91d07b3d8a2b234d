"""Scale-out: items/s through one instance and through several on the same cores, as a ratio, in the same run.

    python benchmarks/scale_out.py                     # 1 and 2 instances on this machine's cores
    python benchmarks/scale_out.py --device            # 1, 2 and 4 instances, more items (a machine of 16+ cores)
    python benchmarks/scale_out.py --instances 1,2,4 --items 4000
    python benchmarks/scale_out.py --ray-serve        # also through Ray Serve replicas behind Serve's proxy

Every configuration gets the same cores: with C cores and k instances, each instance is pinned to C/k of them
(``sched_setaffinity``, as a container's CPU limit caps it) and runs C/k verifier workers, so the ratio shows what
splitting one machine into instances costs or gains, not what more hardware gives. On a 2-core box it can only show
the overhead of balancing (and of a second process's event loop, parsers and memory), never a speed-up; on a machine
whose one instance is bounded by its event loop, several instances can be faster.

Items: MATH-500 reference solutions against their gold answers and against the next problem's (shared data; a
generated math set of the same shape when absent), verifier ``math``. The client is ``AsyncRewardClient``: given a
list of base URLs (``base_url=[u1, u2]``, a client that balances chunks over instances) the benchmark uses it;
with a client that takes one URL it splits the batch itself into one contiguous slice per instance, each sent by
its own client, all at once (the balance a trainer gets from N clients, without failover). Every item must come back
once, in order; each instance's share is counted on its own ``/metrics``.

Two figures per configuration: items/s (wall clock, best of ``--rounds``) and items per CPU-second (the instances'
processes and the client, same pass): on a machine shared with other work, more processes also win more of the CPU,
which raises items/s without any gain of the design; the CPU figure shows what balancing costs.

``--ray-serve`` adds the same instance counts as Ray Serve replicas (``reward_service/deploy/ray_serve.py``) on a
local Ray of the same cores, scored through Serve's one HTTP proxy: the ratio to one instance reached directly is
what the proxy's extra hop and Ray's own processes cost.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))

from reward_client import AsyncRewardClient

from benchmarks._common import SHARED_DATA, service


def load_items(n: int, start: int = 0) -> list[dict[str, Any]]:
    """``n`` items from pair ``start`` on (wrapping around)."""
    path = SHARED_DATA / "math" / "math500.test.jsonl"
    if path.exists():
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        pairs = [(r["solution"], r["answer"]) for r in rows]
        pairs += [(rows[(i + 1) % len(rows)]["solution"], r["answer"]) for i, r in enumerate(rows)]
    else:
        pairs = [(rf"so the answer is $\boxed{{\frac{{{i}}}{{{i + 1}}}}}$", rf"\frac{{{2 * i}}}{{{2 * i + 2}}}")
                 for i in range(1000)]
    picked = [pairs[(start + i) % len(pairs)] for i in range(n)]
    return [{"id": str(i), "verifier": "math", "response": r, "reference": a} for i, (r, a) in enumerate(picked)]


def metric(url: str, name: str) -> float:
    """The sum of a metric's samples on one instance's /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(float(v) for v in re.findall(rf"^{name}(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, flags=re.M))


def cpu_seconds(url: str) -> float:
    """CPU time (user + system) the instance at ``url`` and its worker processes have used: on a machine shared with
    other work, wall-clock items/s also measures how much of the CPU the instances won; this does not."""
    import psutil

    port = url.rsplit(":", 1)[1]
    total = 0.0
    for proc in psutil.Process().children():
        with contextlib.suppress(psutil.NoSuchProcess):
            cmd = proc.cmdline()
            if "--port" in cmd and cmd[cmd.index("--port") + 1] == port:
                for p in [proc, *proc.children(recursive=True)]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        t = p.cpu_times()
                        total += t.user + t.system
    return total


def cpu_of_descendants() -> float:
    """CPU time of every process below this one (Ray's: GCS, raylet, Serve's controller and proxy, the replicas and
    their worker pools) and of this one (the client)."""
    import psutil

    total = time.process_time()
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            t = p.cpu_times()
            total += t.user + t.system
    return total


def multi_url_client(urls: list[str], concurrency: int, chunk_size: int) -> AsyncRewardClient | None:
    """A client over every URL, where the installed client takes a list; else None."""
    if len(urls) == 1:
        return AsyncRewardClient(urls[0], max_concurrency=concurrency, chunk_size=chunk_size)
    try:
        return AsyncRewardClient(base_url=urls, max_concurrency=concurrency, chunk_size=chunk_size)  # type: ignore
    except (TypeError, AttributeError, ValueError):
        return None


async def score(urls: list[str], items: list[dict[str, Any]], concurrency: int,
                chunk_size: int) -> tuple[list[Any], str]:
    client = multi_url_client(urls, concurrency * len(urls), chunk_size)
    if client is not None:
        async with client:
            return await client.verify(items), "client over the URL list" if len(urls) > 1 else "one client"
    size = -(-len(items) // len(urls))
    slices = [items[i * size:(i + 1) * size] for i in range(len(urls))]
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(AsyncRewardClient(u, max_concurrency=concurrency,
                                                                     chunk_size=chunk_size)) for u in urls]
        parts = await asyncio.gather(*(c.verify(s) for c, s in zip(clients, slices)))
    return [r for part in parts for r in part], "batch split across one client per instance"


def run_config(k: int, cores: list[int], items: list[dict[str, Any]], warm: list[dict[str, Any]], rounds: int,
               chunk_size: int) -> dict[str, Any]:
    per = max(1, len(cores) // k)
    groups = [set(cores[(i * per) % len(cores):(i * per) % len(cores) + per]) for i in range(k)]
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(service({"REWARD_SERVICE_WORKERS": str(per),
                                              "REWARD_SERVICE_SANDBOX_WARM_POOL": "0"}, cpus=g)) for g in groups]
        for u in urls:  # parsers and caches warm in every instance, as in a running service
            asyncio.run(score([u], warm, 2 * per, chunk_size))
        best, mode, shares, cpu = 0.0, "", [], 0.0
        for _ in range(rounds):
            before = [metric(u, 'reward_items_total') for u in urls]
            cpu_before = sum(cpu_seconds(u) for u in urls) + time.process_time()
            started = time.perf_counter()
            results, mode = asyncio.run(score(urls, items, 2 * per, chunk_size))
            elapsed = time.perf_counter() - started
            assert [r.id for r in results] == [i["id"] for i in items], "an item missing, repeated or out of order"
            assert all(r.status != "error" for r in results), "an infrastructure error in the results"
            used = sum(cpu_seconds(u) for u in urls) + time.process_time() - cpu_before
            rate = len(items) / elapsed
            if rate > best:
                best, shares, cpu = rate, [metric(u, 'reward_items_total') - b for u, b in zip(urls, before)], used
        restarts = sum(metric(u, "reward_worker_restarts") for u in urls)
    return {"instances": k, "cores_each": per, "items_per_s": best, "mode": mode, "shares": shares,
            "items_per_cpu_s": len(items) / cpu, "restarts": restarts}


def run_serve(k: int, cores: list[int], items: list[dict[str, Any]], warm: list[dict[str, Any]], rounds: int,
              chunk_size: int) -> dict[str, Any]:
    """The same items through Ray Serve: ``k`` replicas of C/k CPUs on a local Ray of C CPUs, one client of the
    one proxy URL (Serve balances). Ray's processes are not pinned; the CPU figure counts all of them."""
    import ray
    from ray import serve

    from benchmarks._common import free_port, wait_ready
    from reward_service.deploy.ray_serve import application

    per = max(1, len(cores) // k)
    port = free_port()
    ray.init(num_cpus=len(cores), include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(application(replicas=k, cpus_per_replica=per, settings={"sandbox_warm_pool": 0}),
                  name="scale-out", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        wait_ready(f"{url}/readyz", _NeverExits())
        asyncio.run(score([url], warm, 2 * per * k, chunk_size))
        best, cpu = 0.0, 0.0
        for _ in range(rounds):
            cpu_before = cpu_of_descendants()
            started = time.perf_counter()
            results, _ = asyncio.run(score([url], items, 2 * per * k, chunk_size))
            elapsed = time.perf_counter() - started
            used = cpu_of_descendants() - cpu_before
            assert [r.id for r in results] == [i["id"] for i in items], "an item missing, repeated or out of order"
            if len(items) / elapsed > best:
                best, cpu = len(items) / elapsed, used
    finally:
        serve.shutdown()
        ray.shutdown()
    return {"instances": k, "cores_each": per, "items_per_s": best, "items_per_cpu_s": len(items) / cpu}


class _NeverExits:
    """``wait_ready`` polls a process; Serve's replicas are not one."""

    def poll(self) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", default="1,2", help="instance counts to compare, the first is the baseline")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="timed passes per configuration (best is kept)")
    parser.add_argument("--chunk-size", type=int, default=64)
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)), help="cores to use in all")
    parser.add_argument("--ray-serve", action="store_true",
                        help="also each instance count as Ray Serve replicas behind Serve's proxy")
    parser.add_argument("--device", action="store_true", help="instances 1,2,4 and 8,000 items (a bigger machine)")
    args = parser.parse_args()
    counts = [1, 2, 4] if args.device else [int(x) for x in args.instances.split(",")]
    n = 8000 if args.device and args.items == 1000 else args.items
    cores = sorted(os.sched_getaffinity(0))[:args.cores]
    items, warm = load_items(n), load_items(200, start=-200)  # warm-up pairs are not timed ones (for n <= 800)
    print(f"{n} math items, {len(cores)} cores in all, chunk size {args.chunk_size}, best of {args.rounds}")
    base: dict[str, Any] = {}
    for k in counts:
        r = run_config(k, cores, items, warm, args.rounds, args.chunk_size)
        base = base or r
        share = "/".join(f"{s / max(sum(r['shares']), 1):.0%}" for s in r["shares"])
        print(f"{k} instance(s) x {r['cores_each']} cores: {r['items_per_s']:8.1f} items/s "
              f"(ratio {r['items_per_s'] / base['items_per_s']:.2f}), {r['items_per_cpu_s']:6.1f} items per CPU-second "
              f"(ratio {r['items_per_cpu_s'] / base['items_per_cpu_s']:.2f}), shares {share}, "
              f"{r['restarts']:.0f} worker restarts ({r['mode']})", flush=True)
    for k in counts if args.ray_serve else []:
        r = run_serve(k, cores, items, warm, args.rounds, args.chunk_size)
        print(f"{k} Ray Serve replica(s) x {r['cores_each']} CPUs: {r['items_per_s']:8.1f} items/s "
              f"(ratio {r['items_per_s'] / base['items_per_s']:.2f}), {r['items_per_cpu_s']:6.1f} items per "
              f"CPU-second (ratio {r['items_per_cpu_s'] / base['items_per_cpu_s']:.2f}), ratios to one instance "
              "reached directly; one client of the proxy", flush=True)


if __name__ == "__main__":
    main()
