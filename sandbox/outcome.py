"""Turn what the supervisor saw (exit, signal, usage, output) into one named ``RunStatus``.

Shared by every backend so "memory exceeded" means the same thing whatever ran the program.
"""
from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass

from sandbox.api import Limits, RunStatus

# How out-of-memory looks from inside each runtime when the address-space/data rlimit refuses an allocation.
_OOM = re.compile(
    r"MemoryError|std::bad_alloc|OutOfMemoryError|JavaScript heap out of memory|out of memory|"
    r"memory allocation of \d+ bytes failed|Cannot allocate memory|failed to reserve memory|"
    r"insufficient memory for the Java Runtime|OutOfMemoryException|Allowed memory size of \d+ bytes exhausted|"
    r"cannot allocate vector of size|NoMemoryError|Out of memory|not enough memory|Out_of_memory|heap overflow|"
    r"Cannot allocate \d+ bytes|cannot allocate \d+ bytes|Allocation would exceed memory limit|"
    r"memory allocation failed|Unable to commit"
)


def as_sent(data: bytes, budget: int) -> tuple[str, int, bool]:
    """A program's bytes as the text an answer carries, cut so that its JSON holds at most ``budget`` bytes; that
    size; and whether it was cut. Counted as sent, not as read: a NUL is six bytes in JSON (``\\u0000``) and an
    invalid byte three (U+FFFD), so a budget of bytes read let one run answer with six times its output budget."""
    text = data.decode("utf-8", "replace")
    size = sent_size(text)
    if size <= budget:
        return text, size, False
    keep, kept, over = 0, 0, len(text)  # the longest prefix that fits: keep fits (kept bytes), over does not
    while over - keep > 1:
        mid = (keep + over) // 2
        size = sent_size(text[:mid])
        if size <= budget:
            keep, kept = mid, size
        else:
            over = mid
    return text[:keep], kept, True


def sent_size(text: str) -> int:
    """Bytes of ``text`` inside a JSON answer (the service sends UTF-8, non-ASCII unescaped)."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


@dataclass
class Observed:
    exit_code: int | None
    signal: int | None
    cpu_ms: float
    max_rss_kb: int
    stderr: str
    stdout_tail: str = ""  # the JVM reports a failed heap reservation on stdout
    timed_out: bool = False  # the wall clock ran out
    cpu_exceeded: bool = False  # the run's processes together spent the CPU budget (each alone: RLIMIT_CPU's signal)
    output_exceeded: bool = False
    oom_killed: bool = False  # the run's memory cgroup hit its limit and the kernel killed a process of the run
    cgroup_limit_mb: int = 0


def classify(o: Observed, limits: Limits) -> tuple[RunStatus, str]:
    if o.oom_killed:
        return RunStatus.MEMORY_EXCEEDED, (f"the run's memory (processes, memfd and shared memory, files in its tmpfs) "
                                           f"reached its cgroup limit of {o.cgroup_limit_mb} MiB")
    if o.cpu_exceeded:
        return RunStatus.TIMEOUT, (f"CPU-time limit of {limits.cpu_s:g}s reached by the run's processes together; the "
                                   "whole process tree was killed")
    if o.timed_out:
        used = (f" with {o.cpu_ms / 1000:.2f}s of the {limits.cpu_s:g}s CPU-time limit used (the program waited, slept "
                "or was starved of CPU)") if o.cpu_ms else ""
        return RunStatus.TIMEOUT, (f"wall-clock limit of {limits.wall_s:g}s reached{used}; the whole process tree "
                                   "was killed")
    if o.output_exceeded:
        return RunStatus.OUTPUT_EXCEEDED, f"output over {limits.output_bytes} bytes; the program was stopped"
    spent = o.cpu_ms >= limits.cpu_s * 1000 * 0.95
    if o.signal == signal.SIGXCPU or (o.signal == signal.SIGKILL and spent):
        return RunStatus.TIMEOUT, f"CPU-time limit of {limits.cpu_s:g}s reached"
    if spent and o.signal is None and o.exit_code not in (0, None):
        # A process under a wrapper (a shell, a test runner) met RLIMIT_CPU's signal and its parent reported that as
        # an exit status (128 + SIGXCPU from a shell): the budget ran out, which is a timeout, not the program's error.
        return RunStatus.TIMEOUT, (f"CPU-time limit of {limits.cpu_s:g}s reached by a process of the run (its parent "
                                   f"exited with code {o.exit_code})")
    if o.exit_code == 0 and o.signal is None:
        return RunStatus.OK, ""
    tail = o.stderr[:2000] + o.stderr[-4000:] + o.stdout_tail[-2000:]
    near_cap = o.max_rss_kb >= limits.memory_mb * 1024 * 0.9
    if _OOM.search(tail) or (o.signal in (signal.SIGSEGV, signal.SIGABRT, signal.SIGKILL) and near_cap):
        return RunStatus.MEMORY_EXCEEDED, f"memory limit of {limits.memory_mb} MiB reached"
    if o.signal == signal.SIGXFSZ:
        return RunStatus.RUNTIME_ERROR, f"file-size limit of {limits.file_size_mb} MiB reached"
    if o.signal is not None:
        try:
            name = signal.Signals(o.signal).name
        except ValueError:
            name = str(o.signal)
        return RunStatus.RUNTIME_ERROR, f"killed by signal {name}"
    return RunStatus.RUNTIME_ERROR, f"exited with code {o.exit_code}"
