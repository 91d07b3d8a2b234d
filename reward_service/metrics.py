"""Prometheus metrics, one registry per app instance (no process-global collectors)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from verifiers.kinds.judges.ratelimit import LimiterStats

JudgeLimitSource = Callable[[], Mapping[str, LimiterStats]]

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

        self.env_sessions_open = Gauge("reward_env_sessions_open", "Environment sessions open", ["env"], registry=r)
        self.env_sessions = Counter("reward_env_sessions_total", "Environment sessions created", ["env"], registry=r)
        self.env_sessions_ended = Counter(
            "reward_env_sessions_ended_total", "Environment sessions ended, by why (closed, reaped, lost, shutdown)",
            ["env", "why"], registry=r)
        self.env_steps = Counter("reward_env_steps_total", "Environment steps", ["env"], registry=r)
        self.env_step_latency = Histogram("reward_env_step_latency_seconds", "Environment step latency", ["env"],
                                          buckets=_LATENCY_BUCKETS, registry=r)

        self.judge_limits = JudgeLimitsCollector()
        r.register(self.judge_limits)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # the environments' session manager reports here (environments.sessions.Observer)
    def opened(self, env: str) -> None:
        self.env_sessions.labels(env).inc()
        self.env_sessions_open.labels(env).inc()

    def stepped(self, env: str, seconds: float) -> None:
        self.env_steps.labels(env).inc()
        self.env_step_latency.labels(env).observe(seconds)

    def ended(self, env: str, why: str) -> None:
        self.env_sessions_open.labels(env).dec()
        self.env_sessions_ended.labels(env, why).inc()


class JudgeLimitsCollector(Collector):
    """The judge backends' rate gates, read when /metrics is scraped (the backends live in the runtime, which
    starts after the metrics exist): configured limits, what was used, the time calls waited and the queue."""

    def __init__(self) -> None:
        self.source: JudgeLimitSource | None = None

    def describe(self) -> list[Metric]:
        return []  # families are only known once the runtime is up

    def collect(self) -> Iterator[Metric]:
        stats = self.source() if self.source is not None else {}
        families: list[tuple[Any, str, str, Callable[[LimiterStats], float | None]]] = [
            (GaugeMetricFamily, "reward_judge_limit_requests_per_minute", "Configured RPM limit per judge backend",
             lambda s: s.requests_per_minute),
            (GaugeMetricFamily, "reward_judge_limit_tokens_per_minute", "Configured TPM limit per judge backend",
             lambda s: s.tokens_per_minute),
            (GaugeMetricFamily, "reward_judge_limit_concurrency", "Configured calls in flight per judge backend",
             lambda s: s.max_concurrency),
            (CounterMetricFamily, "reward_judge_requests", "Judge calls sent (retries included)",
             lambda s: s.requests),
            (CounterMetricFamily, "reward_judge_tokens", "Judge tokens charged (usage where the server reported it)",
             lambda s: s.tokens),
            (CounterMetricFamily, "reward_judge_rate_wait_seconds", "Time judge calls waited at the rate gate",
             lambda s: s.wait_s),
            (CounterMetricFamily, "reward_judge_retry_after_pauses", "Retry-After pauses honoured",
             lambda s: s.pauses),
            (GaugeMetricFamily, "reward_judge_queue_depth", "Judge calls waiting at the rate gate",
             lambda s: s.waiting),
            (GaugeMetricFamily, "reward_judge_in_flight", "Judge calls in flight", lambda s: s.in_flight),
            (GaugeMetricFamily, "reward_judge_window_requests", "Judge calls sent in the last 60 s",
             lambda s: s.window_requests),
            (GaugeMetricFamily, "reward_judge_window_tokens", "Judge tokens charged in the last 60 s",
             lambda s: s.window_tokens),
            (GaugeMetricFamily, "reward_judge_paused_seconds", "Seconds left of a Retry-After pause",
             lambda s: s.paused_s),
        ]
        for family_type, name, doc, read in families:
            family = family_type(name, doc, labels=["backend"])
            for backend, s in sorted(stats.items()):
                value = read(s)
                if value is not None:  # a limit that is not set is not exported as 0
                    family.add_metric([backend], float(value))
            yield family
