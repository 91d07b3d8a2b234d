"""The bwrap backend's settings: what the service's ``sandbox`` settings block holds for it, typed."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from sandbox.api import Limits
from sandbox.limits import clamp, default_caps


@dataclass
class BwrapConfig:
    bwrap: str = "bwrap"
    caps: Limits = field(default_factory=default_caps)  # the most any request may ask for
    defaults: Limits | None = None  # what a request that names no limits gets (None: Limits() within the caps)
    warm_pool: int = 4  # pre-started sandboxes waiting for a job
    max_concurrent: int = 0  # runs executing at once; 0 means 2 x CPU cores
    uid_base: int = 200_000  # root only: per-sandbox uids are uid_base .. uid_base + slots
    compile_wall_s: float = 60.0
    compile_memory_mb: int = 2048
    compile_output_bytes: int = 64 * 1024
    collect_bytes: int = 1 << 20
    languages: list[str] | None = None  # None: every known language whose toolchain exists
    memory_cgroup: str = "auto"  # "auto": use one where the host allows; "off"; or the path of a delegated cgroup
    refill_parallel: int = 0  # warm sandboxes started at once when refilling; 0 means the CPU cores
    batch_budget_s: float = 2.0  # run_cases: no new case starts in a sandbox after this; the rest take a new turn
    # Runs one sandbox serves before it is replaced (1: a fresh sandbox per run). Each run gets fresh mount and IPC
    # namespaces and its own tmpfs, and every process of the previous run is dead before it starts.
    reuse_runs: int = 256
    # Sessions (Backend.open_session): sandboxes started ahead for them (a pool of its own, filled from the first
    # session on), and the most sessions open at once (each holds a sandbox and a uid of its own while it lives)
    session_warm_pool: int = 4
    max_sessions: int = 1024

    def __post_init__(self) -> None:
        self.caps = replace(self.caps, compile_s=self.compile_wall_s)  # the compile budget caps every request's
        self.defaults = self.defaults or clamp(Limits(), self.caps)
        if self.refill_parallel <= 0:
            self.refill_parallel = os.cpu_count() or 1
        if self.max_concurrent <= 0:
            self.max_concurrent = 2 * (os.cpu_count() or 1)
