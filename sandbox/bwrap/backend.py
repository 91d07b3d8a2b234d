"""The default backend: bubblewrap namespaces + rlimits + seccomp + a memory cgroup, with a warm pool of pre-started
sandboxes.

Isolation model (docs/sandbox.md): a sandbox has its own uts and user namespaces, and each run of it gets pid,
network, mount and IPC namespaces of its own, from a run manager forked by a supervisor that never reads a job
(sandbox/inside/supervisor.py; a sandbox serves up to ``reuse_runs`` runs); the system is visible read-only and only
through an allow-list of directories (the interpreter and toolchains outside the system directories are bound at neutral
paths under /.sandbox/host, so no host layout shows); /etc holds only what the loader needs and a passwd of its
own; the run's writable storage is one tmpfs of the request's ``disk_mb`` behind /work, /tmp and /dev/shm; the
environment is cleared. When the service runs as root, bwrap runs privileged and the supervisor drops to a uid of
its own per sandbox (so RLIMIT_NPROC counts only that sandbox's processes and no file owned by root is readable).
The supervisor is the namespace's pid 1: the host kills it (through a pidfd, since bwrap cannot signal another uid)
and bwrap, and its death takes every process the program started, setsid or not. The host hands a sandbox its next
job only after the supervisor's word that the last run's manager is gone and nothing of it is left (``OVER``).
Programs run with no capabilities, no_new_privs and the filter of ``sandbox.seccomp``; where the host has a memory
cgroup hierarchy, each sandbox gets its own group whose limit counts everything the run holds in RAM.
"""
from __future__ import annotations

import asyncio
import logging
import marshal
import os
import time
from dataclasses import asdict, replace

from sandbox import seccomp
from sandbox.api import (
    NETWORKS,
    Backend,
    Limits,
    RunRequest,
    RunResult,
    RunStatus,
    SandboxSession,
    SessionEnded,
    SessionSpec,
    run_client,
    run_priority,
    run_source,
)
from sandbox.bwrap.config import BwrapConfig
from sandbox.bwrap.job import LimitRefused, compiled_code, execute
from sandbox.bwrap.layout import WORK_IN_SANDBOX, Layout
from sandbox.bwrap.pool import Sandbox, WarmPool
from sandbox.bwrap.session import REPL_IMPORTS, REPL_IN_SANDBOX, BwrapSession, SessionJob, session_payload
from sandbox.cgroups import MemoryCgroups
from sandbox.fairslots import FairSlots
from sandbox.languages import ResolvedLanguage, canonical_name, resolve_all, version_of
from sandbox.limits import clamp
from sandbox.paths import collect_problem, files_problem

log = logging.getLogger("sandbox.bwrap")

# Where one run's time goes, as (from mark, to mark); see BwrapBackend.phase_ms.
PHASES = {"slot wait": ("admitted", "slot"), "warm take": ("slot", "taken"), "job write": ("write", "job_read"),
          "mount/setup": ("job_read", "set_up"), "compile": ("set_up", "started"), "program": ("started", "ended"),
          "report": ("ended", "reported"), "kill/drain": ("reported", "collected"),
          "teardown": ("collected", "released")}


class BwrapBackend(Backend):
    name = "bwrap"

    def __init__(self, config: BwrapConfig | None = None) -> None:
        self.config = config or BwrapConfig()
        c = self.config
        self._langs: dict[str, ResolvedLanguage] = resolve_all(c.languages)
        # each toolchain's version line, probed off the event loop once the backend starts (a JVM compiler takes a
        # second to say it); language_info shows "" until its probe is back
        self._versions: dict[str, str] = {}
        self._version_probe: asyncio.Future[None] | None = None
        self._privileged = os.geteuid() == 0
        slots = c.warm_pool + c.max_concurrent + 8
        uids = list(range(c.uid_base, c.uid_base + slots)) if self._privileged else []
        # sessions' sandboxes have uids of their own, past the runs' (each session's processes count alone)
        session_uids = (list(range(c.uid_base + slots, c.uid_base + slots + c.max_sessions + c.session_warm_pool))
                        if self._privileged else [])
        self._layout = Layout(c.bwrap, self._langs, uids + session_uids, self._privileged)
        self._cgroups: MemoryCgroups | None = None
        self._cgroup_reason = "disabled in the configuration (memory_cgroup=off)"
        if c.memory_cgroup != "off":
            self._cgroups, self._cgroup_reason = MemoryCgroups.detect(None if c.memory_cgroup == "auto"
                                                                      else c.memory_cgroup)
        self._filter = seccomp.build(refuse_memfd=self._cgroups is None)
        self._offline_filter = seccomp.build(refuse_memfd=self._cgroups is None,
                                             socket_families=seccomp.OFFLINE_SOCKET_FAMILIES)
        self._slots = FairSlots(c.max_concurrent)  # taken in turns by source (sandbox.api.run_source)
        self.stats = {"runs": 0, "warm_hits": 0, "cold_starts": 0, "sandbox_errors": 0, "reuses": 0}
        self.phase_ms: dict[str, float] = {}  # summed per phase of PHASES, plus "runs", "spawns" and "spawn
        self._pool = WarmPool(c, self._layout.argv_head, self._cgroups, uids, self.stats, self.phase_ms)
        self.session_stats = {"warm_hits": 0, "cold_starts": 0, "reuses": 0}
        self._session_pool = WarmPool(replace(c, warm_pool=c.session_warm_pool, reuse_runs=1),
                                      self._layout.argv_head, self._cgroups, session_uids, self.session_stats, {},
                                      argv_tail=(",".join(REPL_IMPORTS),))

    @property
    def ready(self) -> bool:
        """The warm pool is full (or not wanted): runs start at once."""
        return self._pool.ready

    @property
    def last_error(self) -> str:
        """Why the last warm sandbox could not start ("" once one starts again)."""
        return self._pool.last_error

    def isolation(self) -> dict[str, object]:
        """What enforces each limit on this host (served in /readyz and described in docs/security.md)."""
        return {
            "backend": "bwrap",
            "privileged": self._privileged,
            "capabilities": "none (effective, permitted, inheritable, bounding and ambient sets emptied)",
            "seccomp": (f"{self._filter.arch} filter, {self._filter.length} instructions, refuses "
                        f"{len(self._filter.refused)} syscalls and namespace-creating clone flags"
                        if self._filter else "unavailable: no syscall table for this architecture"),
            "memory": (self._cgroups.mechanism + ": memory_mb + disk_mb per run, counting memfd, shm and tmpfs"
                       if self._cgroups else f"rlimits only, memfd refused (no memory cgroup: {self._cgroup_reason})"),
            "disk": "one tmpfs of disk_mb per run behind /work, /tmp and /dev/shm",
            "network": ("none: network 'loopback' runs get a network namespace of their own, with only loopback; "
                        "network 'none' runs may open unix sockets only" + ("" if self._offline_filter else
                                                                            " (here: a namespace of their own too)")),
            "reuse": (f"a sandbox serves up to {self.config.reuse_runs} runs, each in its own pid, mount and IPC "
                      "namespaces and tmpfs (and network namespace, for loopback runs), served by a manager forked "
                      "from a supervisor that never reads a job"),
            "last_error": self.last_error,
        }

    @property
    def not_ready_reason(self) -> str:
        return "" if self.ready else (f"cannot start a sandbox: {self.last_error}" if self.last_error else "")

    # --- the Backend interface ------------------------------------------------------------------------------

    def languages(self) -> dict[str, bool]:
        return {name: lang.available for name, lang in self._langs.items()}

    def language_info(self) -> dict[str, dict[str, object]]:
        return {name: {"available": lang.available, "compiled": bool(lang.spec.compile), "reason": lang.reason,
                       "file": lang.spec.source_file, "aliases": list(lang.spec.aliases),
                       "version": self._versions.get(name, ""), "assertions": lang.spec.assertions}
                for name, lang in self._langs.items()}

    async def start(self) -> None:
        """Fill the warm pool once (so /readyz means "runs are fast now") and keep it filled."""
        if self._version_probe is None:
            self._version_probe = asyncio.ensure_future(asyncio.to_thread(self._probe_versions))
        await self._pool.start()

    def _probe_versions(self) -> None:
        for name, lang in self._langs.items():
            if lang.available:
                self._versions[name] = version_of(name)

    async def run(self, request: RunRequest) -> RunResult:
        started = time.perf_counter()
        try:
            result = (await self._run(request))[1]
        except Exception as exc:
            log.exception("sandbox failure")
            result = RunResult(RunStatus.SANDBOX_ERROR, reason=f"sandbox failure: {type(exc).__name__}: {exc}")
        if result.status is RunStatus.SANDBOX_ERROR:
            self.stats["sandbox_errors"] += 1
        if not result.wall_ms:
            result.wall_ms = (time.perf_counter() - started) * 1000.0
        return result

    async def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        """All at once, as one source (the caller's ``run_source``, else one of their own) taking its turns."""
        token = run_source.set(run_source.get() or object())
        try:
            return list(await asyncio.gather(*(self.run(r) for r in requests)))
        finally:
            run_source.reset(token)

    async def run_cases(self, request: RunRequest, stdins: list[str]) -> list[RunResult]:
        """The program once per stdin, each run with ``request.limits`` as if alone, but compiled once and started
        from one sandbox per batch (``_run_cases`` in the supervisor): a sandbox takes new cases until
        ``batch_budget_s`` is spent, then gives its slot back and the rest wait for their next turn. Between cases
        every process the program left is killed; files it wrote in its work dir stay for the next case."""
        results: list[RunResult] = []
        while len(results) < len(stdins):
            try:
                batch, outcome = await self._run(request, stdins[len(results):])
            except Exception as exc:
                log.exception("sandbox failure")
                batch, outcome = [], RunResult(RunStatus.SANDBOX_ERROR, reason=f"sandbox failure: {exc}")
            results += batch
            if not batch or outcome.status in (RunStatus.COMPILE_ERROR, RunStatus.SANDBOX_ERROR):
                # the program cannot run (or the sandbox failed): every case left says so
                if outcome.status is RunStatus.SANDBOX_ERROR or not batch:
                    self.stats["sandbox_errors"] += 1
                results += [outcome] * (len(stdins) - len(results))
        return results

    async def open_session(self, spec: SessionSpec) -> SandboxSession:
        """A persistent interpreter in a fresh sandbox (sandbox/bwrap/session.py). The session's limits are the
        caller's (the environments' own caps hold them), except what no sandbox may exceed: the run caps' memory,
        disk and processes."""
        lang = self._langs.get("python")
        if lang is None or not lang.available:
            raise SessionEnded("sandbox_error", "python is not available in this sandbox", infra=True)
        if spec.network not in NETWORKS:
            raise ValueError(f"network must be one of {', '.join(NETWORKS)}")
        caps = self.config.caps
        limits = replace(spec.limits, memory_mb=min(spec.limits.memory_mb, caps.memory_mb),
                         disk_mb=min(spec.limits.disk_mb, caps.disk_mb),
                         processes=min(spec.limits.processes, caps.processes))
        request = RunRequest(code="", language="python", limits=limits, network=spec.network)
        job = self._job(request, lang, limits, [], [0])
        job["source_file"] = REPL_IN_SANDBOX
        await self._session_pool.start()
        return await BwrapSession.open(self._session_pool, SessionJob(session_payload(job, self.config.collect_bytes),
                                                                      limits))

    async def close(self) -> None:
        await self._session_pool.close()
        await self._pool.close()
        if self._version_probe is not None and not self._version_probe.done():
            await asyncio.wait([self._version_probe], timeout=60)  # its thread reports to this loop: let it finish
        if self._cgroups is not None:
            self._cgroups.close()
        self._layout.close()

    # --- one run ----------------------------------------------------------------------------------------------

    def _job(self, request: RunRequest, lang: ResolvedLanguage, limits: Limits, files: list[tuple[str, int]],
             cases: list[int]) -> dict[str, object]:
        """What the run manager needs to know of a run: names, sizes, commands and limits. The files' contents,
        the stdin and what to collect follow it raw (see ``_run``): the manager holds them in its memory only when it
        must, or never."""
        c = self.config
        spec = lang.spec
        src = spec.file_for(request.code)
        lim = {**asdict(limits), "memory_rlimit": spec.memory_rlimit}
        # The compile budget is wall-clock, watched by the host; CPU gets a second more, so an overrun reads as time.
        compile_limits = {**lim, "cpu_s": limits.compile_s + 1, "memory_mb": max(c.compile_memory_mb, limits.memory_mb),
                          "processes": max(spec.compile_processes, limits.processes),
                          "file_size_mb": max(limits.file_size_mb, 256), "open_files": max(limits.open_files, 1024)}
        tools = self._layout.tools.get(lang.spec.name, {})
        py = self._layout.python.executable
        site = tuple(self._layout.python.site_packages)
        rules = self._offline_filter if request.network == "none" and self._offline_filter else self._filter
        return {
            "files": files,  # (name, size) in the order of their contents
            "payload_bytes": sum(size for _, size in files),
            "source_file": src,
            "stdin_bytes": sum(cases),
            # each case's share of stdin follows the stdin as 8 bytes: read as the case starts, so no case's program
            # finds those of later cases in its memory; a single run is one case
            "case_count": len(cases),
            "sizes_bytes": 8 * len(cases),
            "batch_budget_s": c.batch_budget_s,
            "env": {**self._layout.env, **lang.environment(request.code, limits.memory_mb, py, site)},
            "limits": lim,
            "compile": (lang.command(spec.compile, request.code, limits.memory_mb, py, tools, site) if spec.compile
                        else None),
            "compile_limits": compile_limits,
            "compile_output_bytes": c.compile_output_bytes,
            "run": lang.command(spec.run, request.code, limits.memory_mb, py, tools, site),
            "inline_python": spec.inline_python,
            "code_object": (compiled_code(request.code, f"{WORK_IN_SANDBOX}/{src}")
                            if request.precompiled and spec.inline_python else b""),
            "python_path": self._layout.python.site_packages,
            "collect": list(request.collect),
            "collect_bytes": c.collect_bytes,
            "collect_budget": limits.output_bytes,  # all collected files together: the run's output budget
            "disk_bytes": limits.disk_mb << 20,
            "inodes": max(4096, limits.disk_mb * 256),
            # without a filter to keep a run to unix sockets, every run has a network namespace of its own
            "own_network": request.network != "none" or self._offline_filter is None,
            "seccomp": rules.program.hex() if rules else "",
            "await_go": bool(spec.compile) and self._cgroups is not None,
        }

    async def _run(self, request: RunRequest, stdins: list[str] | None = None) -> tuple[list[RunResult], RunResult]:
        """One sandbox: (each case's result in batch mode, the run's own result; for a single run, the program's)."""
        name = canonical_name(request.language)
        lang = self._langs.get(name)
        if lang is None:
            raise ValueError(f"unknown language {request.language!r}")  # callers validate first; see check_request
        if not lang.available:
            return [], RunResult(RunStatus.SANDBOX_ERROR, reason=f"{name} is not available on this host: {lang.reason}")
        problem = (f"network must be one of {', '.join(NETWORKS)}" if request.network not in NETWORKS else "") or \
            files_problem(list(request.files), program=lang.spec.file_for(request.code)) or collect_problem(
            request.collect) or next(
            (f"argument {i} contains a NUL character" for i, a in enumerate(request.args) if "\0" in a), "")
        if problem:  # the HTTP edge answers these with a 422; a library caller gets the same words
            return [], RunResult(RunStatus.SANDBOX_ERROR, reason=f"invalid request: {problem}")
        limits = clamp(request.limits, self.config.caps)
        inputs = [request.stdin.encode()] if stdins is None else [s.encode() for s in stdins]
        contents = {**request.files, lang.spec.file_for(request.code): request.code}
        encoded = [(name, text.encode()) for name, text in contents.items()]
        args = b"\0".join(a.encode("utf-8", "surrogateescape") for a in request.args)
        job = self._job(request, lang, limits, [(name, len(data)) for name, data in encoded], [len(i) for i in inputs])
        # every collect* entry is read only once every process of the run is dead (the program is a fork of the
        # process that reads the job: what it will not run with, it does not find in its memory)
        late = marshal.dumps({key: job.pop(key) for key in [k for k in job if k.startswith("collect")]})
        job.update(args_bytes=len(args), args_count=len(request.args), late_bytes=len(late))
        data = marshal.dumps(job)  # the supervisor is this interpreter: its format, and no imports to read it
        # the files' contents, the arguments, the stdin, the cases' sizes and the late entries raw, behind the job:
        # the run manager moves them into memfds (_into_memfd), so its memory never holds them before it must
        sizes = b"".join(len(i).to_bytes(8, "little") for i in inputs)
        payload = b"".join([len(data).to_bytes(8, "little"), data, *(d for _, d in encoded), args, *inputs, sizes,
                            late])
        cases: list[RunResult] | None = None if stdins is None else []
        marks: dict[str, float] = {"admitted": time.perf_counter()}
        async with self._slots.hold(run_source.get() or object(), run_client.get(), run_priority.get()):
            self.stats["runs"] += 1
            marks["slot"] = time.perf_counter()
            first = await self._pool.take()
            box: Sandbox | None = first
            marks["taken"] = time.perf_counter()
            try:
                try:
                    result = await execute(self.config, first, payload, limits, compiled=bool(lang.spec.compile),
                                           marks=marks, cases=cases)
                except LimitRefused as exc:
                    # a sandbox whose group cannot take this run's limit (memory still charged to it): a fresh one
                    log.info("replacing a sandbox whose memory limit cannot be set: %s", exc)
                    box = None
                    await self._pool.give_back(first)
                    box = fresh = await self._pool.take(fresh=True)
                    result = await execute(self.config, fresh, payload, limits, compiled=bool(lang.spec.compile),
                                           marks=marks, cases=cases)
                return cases or [], result
            finally:
                if box is not None:
                    await self._pool.give_back(box)
                marks["released"] = time.perf_counter()
                self._account(marks)

    def _account(self, marks: dict[str, float]) -> None:
        """Add one run's phases to ``phase_ms`` (benchmarks print where the time goes); a phase whose marks are
        missing (a run that failed early) is skipped."""
        for phase, (start, end) in PHASES.items():
            if start in marks and end in marks:
                self.phase_ms[phase] = self.phase_ms.get(phase, 0.0) + (marks[end] - marks[start]) * 1000.0
        self.phase_ms["runs"] = self.phase_ms.get("runs", 0.0) + 1
