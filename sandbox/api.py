"""The sandbox's Python contract: what a run asks for and what it returns. Backends subclass ``Backend``.

Kept free of any backend so verifiers can code against it (the code verifier reaches the sandbox as the
``sandbox`` resource of its context).
"""
from __future__ import annotations

import abc
import asyncio
import contextvars
import enum
from collections.abc import Hashable
from dataclasses import dataclass, field, replace

from sandbox.turns import FairTurns as FairTurns  # the one turn-taking policy, for the verifiers' queues too
from sandbox.turns import Place as Place

# Whose runs these are, for the turns ``FairTurns`` hands out (the backend's slots, the verifier pool's backlog, the
# judges' rate gates): ``run_source`` names one request (the server sets its request id; the code verifier its item's
# request), ``run_client`` the client it came from (the server sets the peer's address). Unset, each call is a source
# of its own.
run_source: contextvars.ContextVar[Hashable | None] = contextvars.ContextVar("sandbox_run_source", default=None)
run_client: contextvars.ContextVar[Hashable | None] = contextvars.ContextVar("sandbox_run_client", default=None)
# How urgent these runs are: waiters of a higher priority are served before any of a lower one, and only then in
# turns between clients and sources (the server sets it from a job's priority: low -1, normal 0, high 1).
run_priority: contextvars.ContextVar[int] = contextvars.ContextVar("sandbox_run_priority", default=0)


class RunStatus(str, enum.Enum):
    OK = "ok"  # exited 0
    RUNTIME_ERROR = "runtime_error"  # non-zero exit or killed by a signal other than our limits
    COMPILE_ERROR = "compile_error"
    TIMEOUT = "timeout"  # wall or CPU time limit
    MEMORY_EXCEEDED = "memory_exceeded"
    OUTPUT_EXCEEDED = "output_exceeded"  # stdout/stderr over the cap (output truncated)
    SANDBOX_ERROR = "sandbox_error"  # the sandbox itself failed; never the program's fault
    CANCELLED = "cancelled"  # stopped before it ended (client gone, server shutting down); the program was killed


@dataclass
class Limits:
    wall_s: float = 10.0  # the wall clock, from the program's start (a backstop: see wall_backstop)
    cpu_s: float = 10.0  # each process's CPU time, and all the run's processes' together
    memory_mb: int = 1024  # address space
    processes: int = 64
    file_size_mb: int = 64
    open_files: int = 256
    output_bytes: int = 1 << 20  # per stream
    disk_mb: int = 256  # size of the private work dir (a tmpfs); added after the first contract, defaulted
    # Wall-clock (and CPU) seconds of the compile step of a compiled language; over it: compile_error. The default
    # asks for the server's whole compile budget (the backend's cap, e.g. BwrapConfig.compile_wall_s), a request
    # may ask for less (SandboxFusion's compile_timeout). Added later, defaulted.
    compile_s: float = 600.0


# A CPU budget's wall-clock backstop: this many times the budget, plus this much. A program that computes meets its
# CPU budget first on any machine that gives it a third of a CPU or more; the backstop is for one that waits.
WALL_BACKSTOP_FACTOR = 3.0
WALL_BACKSTOP_FLOOR_S = 2.0


def wall_backstop(cpu_s: float) -> float:
    """The wall-clock limit that goes with ``cpu_s`` seconds of CPU time when the verdict is to be the CPU budget's:
    far enough that load does not reach it (a program needing its whole budget gets it with a third of a CPU), near
    enough that a program that sleeps or blocks, and so never spends its CPU budget, still ends."""
    return cpu_s * WALL_BACKSTOP_FACTOR + WALL_BACKSTOP_FLOOR_S


@dataclass
class RunRequest:
    code: str
    language: str = "python"
    stdin: str = ""
    args: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # extra files written into the work dir (relative paths)
    collect: list[str] = field(default_factory=list)  # work-dir files read back after the run (size-capped)
    limits: Limits = field(default_factory=Limits)
    # "loopback": a network namespace of the run's own with its loopback up (127.0.0.1 and ::1 work as anywhere);
    # "none": unix sockets only, and the run skips making a network namespace (a tenth of a short run's CPU)
    network: str = "loopback"
    # Library callers running one fixed, trusted Python program many times (the code verifier's harness): the host
    # compiles it once and every run skips compiling it. Never set from a request: the host must not compile
    # untrusted code in its own process.
    precompiled: bool = False


NETWORKS = ("loopback", "none")


@dataclass
class RunResult:
    status: RunStatus
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    max_rss_kb: int = 0
    truncated: bool = False
    compile_output: str = ""
    files: dict[str, str] = field(default_factory=dict)  # the ``collect``ed files that existed
    reason: str = ""  # for sandbox_error and limit statuses: what happened, in words


def one_run_per_case(request: RunRequest, stdins: list[str]) -> list[RunRequest]:
    """``run_cases`` for backends without a batch mode: one ordinary run per stdin (``run_many`` them)."""
    return [replace(request, stdin=stdin) for stdin in stdins]


@dataclass
class SessionSpec:
    """What a session asks of its sandbox: the limits of the whole session (memory, disk, processes and CPU seconds
    hold for its life; ``wall_s`` is its hard lifetime) and its network. Steps bring their own time limit."""

    limits: Limits = field(default_factory=lambda: Limits(wall_s=3600.0, cpu_s=600.0, memory_mb=512,
                                                          processes=32, disk_mb=64, output_bytes=64 * 1024))
    network: str = "none"


@dataclass
class CellResult:
    """One step of a session: ``status`` is "ok", "error" (the cell raised; ``exception`` says what) or "timeout"
    (interrupted at its time limit; the interpreter recovered). ``stdout``/``stderr`` are each cut at the session's
    ``output_bytes`` (``truncated``); ``value`` is a trailing expression's repr (cut)."""

    status: str
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    exception: dict[str, str] | None = None
    truncated: bool = False
    wall_ms: float = 0.0


class SessionEnded(Exception):
    """The session's interpreter is gone. ``status`` names why: "step_hung" (a step did not stop at its interrupt),
    "memory_exceeded", "cpu_exceeded", "exited" (the program ended its own interpreter), "protocol_error" (the
    program wrote what the host cannot read), "lifetime_exceeded", or "sandbox_error" (the host's fault, never the
    program's: ``infra`` is True then)."""

    def __init__(self, status: str, reason: str, infra: bool = False) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.infra = infra


class SandboxSession(abc.ABC):
    """A long-lived interpreter in a sandbox of its own, which serves no other session before or after."""

    @abc.abstractmethod
    async def exec(self, code: str, timeout_s: float) -> CellResult:
        """Run one cell; raises ``SessionEnded`` when the interpreter is gone (then every later call raises it)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session and free its sandbox (idempotent)."""

    @property
    @abc.abstractmethod
    def alive(self) -> bool: ...

    def usage(self) -> dict[str, int]:
        """What the session holds now, where the backend can say (``memory_bytes``)."""
        return {}


class Backend(abc.ABC):
    """What every backend offers the service and the verifiers. ``run`` and ``languages`` are each backend's own; the
    rest have defaults (one run per case, no warm-up, always ready, nothing more to say) that a backend overrides
    when it has more, so callers use them all without probing for them."""

    name = "backend"

    @abc.abstractmethod
    async def run(self, request: RunRequest) -> RunResult: ...

    @abc.abstractmethod
    def languages(self) -> dict[str, bool]: ...  # language -> available on this host

    async def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        """All at once; each result as if run alone."""
        return list(await asyncio.gather(*(self.run(r) for r in requests)))

    async def run_cases(self, request: RunRequest, stdins: list[str]) -> list[RunResult]:
        """The program once per stdin, each result as if run alone with ``request.limits`` (stdin/stdout tests)."""
        return await self.run_many(one_run_per_case(request, stdins))

    def language_info(self) -> dict[str, dict[str, object]]:
        """Per language: ``available``, and where the backend knows them ``compiled``, ``reason`` (why not
        available), ``file`` and ``aliases``."""
        return {name: {"available": available} for name, available in self.languages().items()}

    @property
    def reason(self) -> str:
        """Why no program can run on this backend ("" when they can): a disabled or missing sandbox says why."""
        return ""

    @property
    def ready(self) -> bool:
        """Runs start at once (a warm pool is filled); /readyz waits for it."""
        return True

    @property
    def not_ready_reason(self) -> str:
        """Why the backend is not ready, when it has failed rather than still starting ("" otherwise)."""
        return ""

    def isolation(self) -> dict[str, object] | None:
        """What enforces each limit on this host (/readyz shows it), or None when the backend cannot say."""
        return None

    async def open_session(self, spec: SessionSpec) -> SandboxSession:
        """A persistent Python interpreter in a sandbox of its own; raises ``SessionEnded`` (infra) when the
        backend cannot give one."""
        raise SessionEnded("sandbox_error", f"the {self.name} backend has no sessions", infra=True)

    async def start(self) -> None:
        """Start what runs ahead of the first request (a warm pool); the service calls it once, at start-up."""
        return None

    async def close(self) -> None:
        """Release everything the backend holds; no run is served after it."""
        return None
