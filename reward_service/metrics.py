"""Prometheus metrics, one registry per app instance (no process-global collectors)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "reward_requests_total", "HTTP requests by route and status code", ["route", "code"], registry=r
        )
        self.request_latency = Histogram(
            "reward_request_latency_seconds", "HTTP request latency by route", ["route"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.items = Counter(
            "reward_items_total", "Verified items by verifier and verdict status", ["verifier", "status"], registry=r
        )
        self.item_latency = Histogram(
            "reward_item_latency_seconds", "Per-item verification latency by verifier", ["verifier"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.queue_depth = Gauge("reward_queue_depth", "Items admitted and not yet finished", registry=r)
        self.workers_busy = Gauge("reward_workers_busy", "Verifier worker processes running a check", registry=r)
        self.worker_restarts = Gauge(
            "reward_worker_restarts", "Verifier workers replaced after a timeout or crash", registry=r
        )
        self.rejected = Counter(
            "reward_admission_rejected_total", "Requests refused by admission control", ["reason"], registry=r
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
