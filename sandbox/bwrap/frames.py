"""The wire between the host and a sandbox's supervisor: frames of one byte of kind, four of length (little-endian)
and the data, on the result pipe; the host's only word back is ``GO`` on the supervisor's stdin.

The supervisor (sandbox/inside/supervisor.py) cannot import this module, so it writes the letters itself;
tests/sandbox/test_sandbox_frames.py checks that they are these.
"""
from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Final, TypedDict

from sandbox.api import RunResult
from sandbox.outcome import as_sent


class FrameKind(bytes, enum.Enum):
    """What a frame holds. Case matters: ``COMPILER_OUTPUT`` (c) and ``STARTING`` (C) are two kinds."""

    READY = b"R"  # a sandbox is started (data: why it can serve one run only, if so)
    COMPILER_OUTPUT = b"c"
    STARTING = b"C"  # the program starts now: the host's wall clock starts (and it may lower the memory limit)
    STDOUT = b"O"  # a chunk of a case's output
    STDERR = b"E"
    CASE = b"H"  # a case's header (JSON, a ``Report``): exit, signal, usage, wall time, the sizes of its output
    FILE = b"F"  # a collected file: name length (2 bytes), name, contents
    REPORT = b"D"  # the run's report (JSON, a ``Report``)
    OVER = b"Z"  # from the supervisor once the run's manager exited (data: why the sandbox must not be reused)


HEAD: Final = 5  # a frame's kind and length
GO: Final = b"G"  # the host's answer to STARTING when the job asked for it (``await_go``): the limit is lowered


class Report(TypedDict, total=False):
    """A JSON line of the supervisor's (sandbox/inside/supervisor.py): the run's report, or a batch case's header."""

    phase: str  # "run", "compile", "setup" (then only ``error``) or "case"
    error: str
    marks: list[float]  # its CLOCK_MONOTONIC marks (see job.supervisor_marks)
    compile_output: str
    exit_code: int | None
    signal: int | None
    cpu_ms: float
    max_rss_kb: int
    files: dict[str, str]
    i: int  # a case's index, then its wall time and the sizes of the stdout and stderr that follow the header
    wall_ms: float
    out: int
    err: int
    timed_out: bool
    cpu_exceeded: bool
    output_exceeded: bool


async def read_frame(stream: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One frame of the supervisor's (sandbox/inside/supervisor.py): (kind, data); (b"", b"") once it is gone."""
    try:
        head = await stream.readexactly(HEAD)
        return head[:1], await stream.readexactly(int.from_bytes(head[1:], "little"))
    except asyncio.IncompleteReadError:
        return b"", b""


@dataclass
class Frames:
    """What the supervisor reported of one run besides its output."""

    report: Report | None = None
    single: RunResult | None = None  # a single run's program outcome (its one case)
    compile_output: str = ""
    files: dict[str, str] = field(default_factory=dict)
    file_bytes: int = 0  # the collected files' bytes so far
    over_budget: bool = False  # more than the budget (as the answer sends it) came: the rest was not kept

    def collected(self, data: bytes, budget: int) -> None:
        """One ``FILE`` frame (name length, name, contents), kept only within the run's output budget: the host never
        holds more of a run's files than that, whatever the supervisor sends."""
        size = int.from_bytes(data[:2], "little")
        if self.file_bytes >= budget:
            self.over_budget = True
            return
        text, sent, cut = as_sent(data[2 + size:], budget - self.file_bytes)
        self.over_budget = self.over_budget or cut
        self.file_bytes += sent
        self.files[data[2:2 + size].decode(errors="replace")] = text
