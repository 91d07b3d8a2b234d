"""Prometheus metrics, one registry per app instance (no process-global collectors)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reward_service.jobs.manager import JobsSnapshot
from verifiers.kinds.judges.ratelimit import LimiterStats

JudgeLimitSource = Callable[[], Mapping[str, LimiterStats]]
JobsSource = Callable[[], JobsSnapshot | None]

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
        self.jobs = JobsCollector()
        r.register(self.jobs)

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


# One family per field of ``LimiterStats``: (type, field, help); the metric is reward_judge_<name>, the name being
# the field's own unless _JUDGE_NAMES says otherwise.
_JUDGE_FAMILIES: tuple[tuple[type[GaugeMetricFamily] | type[CounterMetricFamily], str, str], ...] = (
    (GaugeMetricFamily, "requests_per_minute", "Configured RPM limit per judge backend"),
    (GaugeMetricFamily, "tokens_per_minute", "Configured TPM limit per judge backend"),
    (GaugeMetricFamily, "max_concurrency", "Configured calls in flight per judge backend"),
    (CounterMetricFamily, "requests", "Judge calls sent (retries included)"),
    (CounterMetricFamily, "tokens", "Judge tokens charged (usage where the server reported it)"),
    (CounterMetricFamily, "wait_s", "Time judge calls waited at the rate gate"),
    (CounterMetricFamily, "pauses", "Retry-After pauses honoured"),
    (GaugeMetricFamily, "waiting", "Judge calls waiting at the rate gate"),
    (GaugeMetricFamily, "in_flight", "Judge calls in flight"),
    (GaugeMetricFamily, "window_requests", "Judge calls sent in the last 60 s"),
    (GaugeMetricFamily, "window_tokens", "Judge tokens charged in the last 60 s"),
    (GaugeMetricFamily, "paused_s", "Seconds left of a Retry-After pause"),
)
_JUDGE_NAMES = {
    "requests_per_minute": "limit_requests_per_minute", "tokens_per_minute": "limit_tokens_per_minute",
    "max_concurrency": "limit_concurrency", "wait_s": "rate_wait_seconds", "pauses": "retry_after_pauses",
    "waiting": "queue_depth", "paused_s": "paused_seconds",
}


class JudgeLimitsCollector(Collector):
    """The judge backends' rate gates, read when /metrics is scraped (the backends live in the runtime, which
    starts after the metrics exist): configured limits, what was used, the time calls waited and the queue."""

    def __init__(self) -> None:
        self.source: JudgeLimitSource | None = None

    def describe(self) -> list[Metric]:
        return []  # families are only known once the runtime is up

    def collect(self) -> Iterator[Metric]:
        stats = self.source() if self.source is not None else {}
        for family_type, field, doc in _JUDGE_FAMILIES:
            family = family_type(f"reward_judge_{_JUDGE_NAMES.get(field, field)}", doc, labels=["backend"])
            for backend, s in sorted(stats.items()):
                value = getattr(s, field)
                if value is not None:  # a limit that is not set is not exported as 0
                    family.add_metric([backend], float(value))
            yield family


class JobsCollector(Collector):
    """The jobs (``/v1/jobs``), read from the job manager when /metrics is scraped: jobs held by state, undecided
    items by priority (what a high-priority job waits behind), items held against ``jobs_max_stored_results``, and
    the store's size and writes (a store that grows or writes far more often than verdicts arrive shows here)."""

    def __init__(self) -> None:
        self.source: JobsSource | None = None

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        snap = self.source() if self.source is not None else None
        if snap is None:
            return
        jobs = GaugeMetricFamily("reward_jobs", "Jobs held (unfinished, or ended within jobs_ttl_s) by state",
                                 labels=["state"])
        for state, n in snap.jobs.items():
            jobs.add_metric([state], n)
        yield jobs
        queued = GaugeMetricFamily("reward_jobs_queued_items", "Undecided items of unfinished jobs by priority",
                                   labels=["priority"])
        for priority, n in snap.queued_items.items():
            queued.add_metric([priority], n)
        yield queued
        yield GaugeMetricFamily("reward_jobs_held_items", "Items of the jobs held (jobs_max_stored_results bounds "
                                "them)", value=snap.held_items)
        submitted = CounterMetricFamily("reward_jobs_submitted", "Jobs accepted since the start, by priority",
                                        labels=["priority"])
        for priority, n in sorted(snap.submitted.items()):
            submitted.add_metric([priority], n)
        yield submitted
        if snap.store_bytes is not None:
            yield GaugeMetricFamily("reward_jobs_store_bytes", "Size of the job store on disk (with its WAL)",
                                    value=snap.store_bytes)
            yield CounterMetricFamily("reward_jobs_store_writes", "Transactions committed to the job store",
                                      value=snap.store_writes)
            yield CounterMetricFamily("reward_jobs_store_verdicts", "Verdicts written to the job store",
                                      value=snap.store_verdicts)
