"""One job in a sandbox: hand it over, read the supervisor's frames until the run is over, and name the result.

A job is the run manager's header (names, sizes, commands, limits; marshal) followed by the files' contents, the
arguments, the stdin and what to collect, raw (``BwrapBackend._run`` builds it). The host keeps a backstop on the
wall clock and destroys a sandbox that overruns it or whose supervisor did not say it can serve another run.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import marshal
import time

from sandbox.api import Limits, RunResult, RunStatus
from sandbox.bwrap.config import BwrapConfig
from sandbox.bwrap.frames import GO, FrameKind, Frames, Report, read_frame
from sandbox.bwrap.pool import Sandbox
from sandbox.cgroups import MemoryGroup
from sandbox.outcome import Observed, as_sent, classify

log = logging.getLogger("sandbox.bwrap")

OVERHEAD_MB = 64  # the supervisor's interpreter and kernel bookkeeping, on top of memory_mb + disk_mb
HELD_SLACK = 16 << 20  # memory a finished run may leave charged (the supervisor's own heap moving) before no reuse
# How long after a run's report its manager may take to exit (freeing the run's memory) and the supervisor to say
# the sandbox can serve another run; past it the sandbox is killed
SETTLE_S = 10.0


class LimitRefused(Exception):
    """The sandbox's memory cgroup refused the run's limit before the job was sent: the run needs another sandbox."""


def _memory_limit_mb(config: BwrapConfig, limits: Limits, compiling: bool) -> int:
    memory = max(config.compile_memory_mb, limits.memory_mb) if compiling else limits.memory_mb
    return memory + limits.disk_mb + OVERHEAD_MB


async def execute(config: BwrapConfig, box: Sandbox, job: bytes, limits: Limits, compiled: bool,
                  marks: dict[str, float] | None = None, cases: list[RunResult] | None = None) -> RunResult:
    """Hand the job over and read the frames of the run's manager until its ``REPORT``: the run's answer is whole
    then (every process of the run is dead), so it is returned at once, and what the supervisor says of the sandbox
    afterwards (``OVER``, once the manager exited) is left to ``box.settling`` (``settle``), off the run's critical
    path. In batch mode (``cases``) each case's result is appended to ``cases`` as its header arrives. The manager
    keeps each case's wall clock; the host keeps a backstop (the compile budget, then the run's clock and a grace)
    and destroys a sandbox that overruns it, or whose supervisor did not say, once the manager was gone, that the
    sandbox can serve another run."""
    marks = {} if marks is None else marks
    loop = asyncio.get_running_loop()
    backstop = limits.wall_s + 2.0 if cases is None else config.batch_budget_s + limits.wall_s + 5.0
    proc = box.proc
    assert proc.stdin
    cgroup_mb = 0
    if box.group is not None:
        cgroup_mb = _memory_limit_mb(config, limits, compiling=compiled)
        try:
            box.group.set_limit(cgroup_mb << 20)
        except OSError as exc:  # more is charged to the group than the limit (EBUSY): nothing was sent yet
            raise LimitRefused(exc.strerror or str(exc)) from exc
        box.oom_seen = box.group.oom_kills()
    t0 = marks["write"] = time.perf_counter()
    proc.stdin.write(job)
    with contextlib.suppress(ConnectionError):
        await proc.stdin.drain()
    out, err = bytearray(), bytearray()
    got = Frames()
    started = timed_out = False
    try:
        async with asyncio.timeout_at(loop.time() + (limits.compile_s if compiled else backstop)) as clock:
            while True:
                kind, data = await read_frame(box.result)
                if kind == FrameKind.STDOUT:
                    out += data
                elif kind == FrameKind.STDERR:
                    err += data
                elif kind == FrameKind.CASE:
                    case = _case(box, json.loads(data), bytes(out), bytes(err), limits, cgroup_mb)
                    out, err = bytearray(), bytearray()
                    if cases is None:
                        got.single = case
                    else:
                        cases.append(case)
                elif kind == FrameKind.STARTING:
                    if compiled and box.group is not None:
                        cgroup_mb = _memory_limit_mb(config, limits, compiling=False)
                        failed = await _lower_after_compile(box, box.group, cgroup_mb)
                        if failed is not None:
                            return failed
                    started = True
                    clock.reschedule(loop.time() + backstop)
                elif kind == FrameKind.COMPILER_OUTPUT:
                    got.compile_output = data.decode("utf-8", "replace")
                elif kind == FrameKind.FILE:
                    got.collected(data, limits.output_bytes)
                elif kind == FrameKind.REPORT and got.report is None:
                    marks["reported"] = time.perf_counter()
                    got.report = json.loads(data)
                    supervisor_marks(got.report, marks)
                    break
                else:  # the supervisor is gone (b""), or said the run is over without its report, or sent a frame
                    # that never comes here: the sandbox goes
                    break
    except TimeoutError:
        timed_out = True
    if got.report is not None and not timed_out:
        box.settling = settle(box, loop.time() + SETTLE_S)
    else:
        box.kill()  # whatever is left of the run dies with its supervisor
    marks["collected"] = time.perf_counter()
    compile_timed_out = timed_out and compiled and not started
    oom = (box.group is not None and got.single is None and box.group.oom_kills() > box.oom_seen)
    return _result(got, cases is not None, limits, wall_ms=(time.perf_counter() - t0) * 1000.0,
                   timed_out=timed_out and not compile_timed_out, compile_timed_out=compile_timed_out,
                   oom_killed=oom, cgroup_mb=cgroup_mb, out=bytes(out), err=bytes(err))


def _result(got: Frames, batch: bool, limits: Limits, *, wall_ms: float, timed_out: bool,
            compile_timed_out: bool, oom_killed: bool, cgroup_mb: int, out: bytes, err: bytes) -> RunResult:
    """The run's result from what the supervisor sent (for a batch: only how the batch as a whole ended)."""
    report = got.report
    if compile_timed_out:
        return RunResult(RunStatus.COMPILE_ERROR, wall_ms=wall_ms,
                         reason=f"compilation exceeded its time limit of {limits.compile_s:g}s")
    if report is not None and report.get("phase") == "setup":
        return RunResult(RunStatus.SANDBOX_ERROR, wall_ms=wall_ms,
                         reason=f"sandbox set-up failed: {report.get('error', 'unknown error')}")
    if report is not None and report.get("phase") == "compile":
        return RunResult(RunStatus.COMPILE_ERROR, exit_code=report.get("exit_code"),
                         signal=report.get("signal"), compile_output=got.compile_output,
                         wall_ms=wall_ms, reason="compilation failed")
    if got.single is not None:
        got.single.files = got.files
        got.single.compile_output = got.compile_output
        return _with_collect_report(got.single, report or {}, got.over_budget)
    if batch and report is not None:
        return RunResult(RunStatus.OK, wall_ms=wall_ms, compile_output=got.compile_output)
    if timed_out or oom_killed:
        # the program's case never ended: the backstop fired, or the memory cgroup's OOM killer took the run's
        # manager along with it
        return _classified({}, out, err, False, wall_ms, limits, timed_out=timed_out, oom_killed=oom_killed,
                           cgroup_mb=cgroup_mb)
    # The run's manager (pid 1 of the run's pid namespace, which the program cannot signal) or the supervisor
    # died before reporting: that is the sandbox failing, never the program's verdict.
    return RunResult(RunStatus.SANDBOX_ERROR, wall_ms=wall_ms,
                     reason="the sandbox's supervisor exited without a report")


async def settle(box: Sandbox, deadline: float) -> None:
    """After a run's report: wait for the supervisor's ``OVER`` (sent once the run's manager exited and the
    supervisor checked that nothing of the run is alive and its own limits are as they were). The sandbox serves
    another run only if that frame came, empty, before ``deadline`` (the event loop's clock) and the run left nothing
    pinned in its memory cgroup; else it is killed."""
    try:
        async with asyncio.timeout_at(deadline):
            kind, data = await read_frame(box.result)
    except TimeoutError:
        kind, data = b"", b""
    box.reusable = kind == FrameKind.OVER and not data and await _holds_nothing(box)
    if not box.reusable:
        box.kill()


async def _holds_nothing(box: Sandbox) -> bool:
    """Whether the run left nothing pinned in the sandbox's memory cgroup (anonymous or shared memory, socket
    buffers) beyond what the idle supervisor held, waiting briefly for the kernel's deferred frees (an IPC
    namespace is freed from a work queue)."""
    if box.group is None:
        return True
    for _ in range(20):
        if box.group.held_bytes() <= box.held_base + HELD_SLACK:
            return True
        await asyncio.sleep(0.005)
    log.info("not reusing a sandbox: its run left %d MiB pinned", (box.group.held_bytes() - box.held_base) >> 20)
    return False


async def _lower_after_compile(box: Sandbox, group: MemoryGroup, cgroup_mb: int) -> RunResult | None:
    """The compiler is done: the program gets its own (lower) memory limit before its first instruction, then
    the supervisor's go. A limit that cannot be lowered fails the run as the sandbox's error."""
    box.oom_seen = group.oom_kills()
    try:
        group.set_limit(cgroup_mb << 20)
    except OSError as exc:
        box.kill()
        return RunResult(RunStatus.SANDBOX_ERROR,
                         reason=f"cannot lower the run's memory limit after compiling: {exc.strerror or exc}")
    assert box.proc.stdin
    box.proc.stdin.write(GO)
    with contextlib.suppress(ConnectionError):
        await box.proc.stdin.drain()
    return None


def _case(box: Sandbox, header: Report, out: bytes, err: bytes, limits: Limits,
          cgroup_mb: int) -> RunResult:
    """One case's result from its header and output; an OOM kill since the last case is its own."""
    oom = False
    if box.group is not None:
        kills = box.group.oom_kills()
        oom, box.oom_seen = kills > box.oom_seen, kills
    return _classified(header, out, err, bool(header.get("output_exceeded")), float(header.get("wall_ms", 0.0)),
                       limits, timed_out=bool(header.get("timed_out")), oom_killed=oom, cgroup_mb=cgroup_mb,
                       cpu_exceeded=bool(header.get("cpu_exceeded")))


def _with_collect_report(result: RunResult, report: Report, over_budget: bool) -> RunResult:
    """Name what ``collect`` could not return whole: files cut at the per-file cap or the run's output budget (then
    the run is output_exceeded, as a cut stdout is), and names that were hard links to a file already returned."""
    notes: list[str] = []
    cut = report.get("collect_cut") or []
    for entry in cut if isinstance(cut, list) else []:
        if isinstance(entry, list) and len(entry) == 3:
            name, kept, size = entry
            notes.append(f"collected file {name!r} cut at {kept} of its {size} bytes" if kept else
                         f"collected file {name!r} ({size} bytes) left out: the run's output budget was spent")
    if over_budget:
        notes.append("collected files were cut where they reached the run's output budget (counted as sent)")
    links = report.get("collect_links") or []
    for entry in links if isinstance(links, list) else []:
        if isinstance(entry, list) and len(entry) == 2:
            notes.append(f"{entry[0]!r} is the same file as {entry[1]!r}, returned once under that name")
    if not notes:
        return result
    exceeded = bool(cut) or over_budget
    if exceeded and result.status == RunStatus.OK:
        result.status = RunStatus.OUTPUT_EXCEEDED
    result.truncated = result.truncated or exceeded
    result.reason = "; ".join([result.reason, *notes] if result.reason else notes)
    return result


def _classified(rep: Report, stdout: bytes, stderr: bytes, truncated: bool, wall_ms: float, limits: Limits, *,
                timed_out: bool, oom_killed: bool, cgroup_mb: int, cpu_exceeded: bool = False) -> RunResult:
    """What the supervisor saw of one program process, named (``sandbox.outcome.classify``); each stream within
    the output budget as the answer sends it."""
    out, _, out_cut = as_sent(stdout, limits.output_bytes)
    err, _, err_cut = as_sent(stderr, limits.output_bytes)
    truncated = truncated or out_cut or err_cut
    observed = Observed(
        exit_code=rep.get("exit_code"), signal=rep.get("signal"),
        cpu_ms=float(rep.get("cpu_ms", 0.0)), max_rss_kb=int(rep.get("max_rss_kb", 0)),
        stderr=err, stdout_tail=out[-2000:], timed_out=timed_out, cpu_exceeded=cpu_exceeded, output_exceeded=truncated,
        oom_killed=oom_killed, cgroup_limit_mb=cgroup_mb,
    )
    status, reason = classify(observed, limits)
    return RunResult(
        status, exit_code=observed.exit_code,
        signal=observed.signal if not (timed_out or cpu_exceeded or oom_killed) else 9,
        stdout=out, stderr=err, wall_ms=wall_ms, cpu_ms=observed.cpu_ms, max_rss_kb=observed.max_rss_kb,
        truncated=truncated, compile_output=str(rep.get("compile_output", "")),
        files=dict(rep.get("files") or {}), reason=reason,
    )


@functools.lru_cache(maxsize=8)
def compiled_code(source: str, path: str) -> bytes:
    """A trusted program's code object (``RunRequest.precompiled``), marshalled for the supervisor (this
    interpreter's format)."""
    return marshal.dumps(compile(source, path, "exec"))


def supervisor_marks(report: Report, marks: dict[str, float]) -> None:
    """The supervisor's CLOCK_MONOTONIC marks (job read, set up, program started, program ended), which is the
    clock of ``time.perf_counter`` here: accepted only in order and inside this run's window."""
    got = report.pop("marks", None)
    names = ("job_read", "set_up", "started", "ended")
    if (isinstance(got, list) and len(got) == len(names) and all(isinstance(t, float) for t in got)
            and marks["write"] <= got[0] <= got[1] <= got[2] <= got[3] <= marks["reported"]):
        marks.update(zip(names, got))
