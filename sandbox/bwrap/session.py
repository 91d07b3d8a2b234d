"""Sessions on the bwrap backend: a persistent interpreter (sandbox/inside/repl.py) in a sandbox of its own.

A session takes a fresh sandbox from a warm pool of its own (sandboxes that serve one job each, with uids of their
own), hands it a *session job* (the run manager's usual job, with ``session`` set: the program is the interpreter,
fork of the manager's warm interpreter, and keeps the job pipe and the result pipe to talk to the host), and keeps it
until the session ends. The sandbox's whole containment holds for the session's life: its memory cgroup
(``memory_mb`` + ``disk_mb``), its tmpfs, its uid's process limit, its CPU seconds, the seccomp filter, no network
unless asked. Its end kills the sandbox: nothing of it serves another session.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import marshal
import signal
from dataclasses import dataclass
from typing import Any

from sandbox.api import CellResult, Limits, SandboxSession, SessionEnded
from sandbox.bwrap.frames import HEAD, FrameKind
from sandbox.bwrap.job import OVERHEAD_MB
from sandbox.bwrap.pool import Sandbox, SandboxStartError, WarmPool
from sandbox.inside import REPL

log = logging.getLogger("sandbox.bwrap")

ANSWER = b"S"  # the interpreter's frame kind (sandbox/inside/repl.py writes it; the supervisor never does)
REPL_IN_SANDBOX = "/.sandbox/repl.py"
START_S = 15.0  # from the job's write to the interpreter's first answer
# past a step's time limit: the interpreter's own interrupt comes first, this is the host's backstop
GRACE_S = 2.0
# what the interpreter imports as it starts (sandbox/inside/repl.py): its sandbox's supervisor loads them ahead
REPL_IMPORTS = ("ast", "json", "linecache", "threading", "traceback")
STATUSES = ("step_hung", "memory_exceeded", "cpu_exceeded", "exited", "protocol_error", "lifetime_exceeded",
            "sandbox_error")


@functools.lru_cache(maxsize=1)
def repl_code() -> bytes:
    """The interpreter program's code object, compiled once (it is trusted: the host's own file)."""
    return marshal.dumps(compile(REPL.read_text(), REPL_IN_SANDBOX, "exec"))


@dataclass
class SessionJob:
    """What a session's sandbox is handed: the payload for its run manager and the limits it was built with."""

    payload: bytes
    limits: Limits


def session_payload(job: dict[str, Any], collect_bytes: int) -> bytes:
    """A run manager's job (``BwrapBackend._job``, built for no files and one empty case) as a session job: the
    interpreter as its precompiled program, the pipes kept (``session``), nothing to collect."""
    job = {**job, "session": True, "code_object": repl_code(), "files": [], "payload_bytes": 0}
    late = marshal.dumps({"collect": [], "collect_bytes": collect_bytes, "collect_budget": 0})
    for key in [k for k in job if k.startswith("collect")]:
        job.pop(key)
    job.update(args_bytes=0, args_count=0, late_bytes=len(late))
    data = marshal.dumps(job)
    return b"".join([len(data).to_bytes(8, "little"), data, (0).to_bytes(8, "little"), late])


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bytes]:
    """One frame, refused past ``cap`` bytes (the interpreter runs beside the policy's code: its frames are not
    trusted). (b"", b"") once the sandbox is gone; (b"!", b"") for a frame over the cap."""
    try:
        head = await stream.readexactly(HEAD)
        size = int.from_bytes(head[1:], "little")
        if size > cap:
            return b"!", b""
        return head[:1], await stream.readexactly(size)
    except asyncio.IncompleteReadError:
        return b"", b""


def _cell(data: bytes) -> CellResult:
    """The interpreter's answer, read as untrusted JSON: a field of the wrong type is a protocol error."""
    raw = json.loads(data)
    if not isinstance(raw, dict) or raw.get("status") not in ("ok", "error", "timeout"):
        raise ValueError("not a cell's answer")
    exc = raw.get("exception")
    if exc is not None and not (isinstance(exc, dict) and all(isinstance(v, str) for v in exc.values())):
        raise ValueError("malformed exception")
    value = raw.get("value")
    fields = (raw.get("stdout"), raw.get("stderr"))
    if not all(isinstance(f, str) for f in fields) or not (value is None or isinstance(value, str)):
        raise ValueError("malformed output")
    return CellResult(status=raw["status"], stdout=raw["stdout"], stderr=raw["stderr"], value=value, exception=exc,
                      truncated=bool(raw.get("truncated")), wall_ms=float(raw.get("wall_ms") or 0.0))


class BwrapSession(SandboxSession):
    """One session's sandbox and its interpreter; steps run one at a time."""

    def __init__(self, pool: WarmPool, box: Sandbox, limits: Limits) -> None:
        self._pool = pool
        self._box = box
        self._limits = limits
        self._lock = asyncio.Lock()
        self._ended: SessionEnded | None = None
        self._released = False
        self._frame_cap = 4 * limits.output_bytes + (1 << 18)

    @classmethod
    async def open(cls, pool: WarmPool, job: SessionJob) -> BwrapSession:
        try:
            box = await pool.take()
        except SandboxStartError as exc:
            raise SessionEnded("sandbox_error", f"cannot start a sandbox: {exc}", infra=True) from exc
        session = cls(pool, box, job.limits)
        try:
            await session._start(job)
        except BaseException:
            await asyncio.shield(session.close())
            raise
        return session

    async def _start(self, job: SessionJob) -> None:
        box = self._box
        if box.group is not None:
            try:
                box.group.set_limit((self._limits.memory_mb + self._limits.disk_mb + OVERHEAD_MB) << 20)
            except OSError as exc:
                raise SessionEnded("sandbox_error", f"cannot set the session's memory limit: {exc}",
                                   infra=True) from exc
            box.oom_seen = box.group.oom_kills()
        assert box.proc.stdin is not None
        box.proc.stdin.write(job.payload)
        with contextlib.suppress(ConnectionError):
            await box.proc.stdin.drain()
        try:
            async with asyncio.timeout(START_S):
                while True:
                    kind, data = await _read_capped(box.result, self._frame_cap)
                    if kind == FrameKind.STARTING:
                        continue
                    if kind == ANSWER and json.loads(data).get("ready"):
                        return
                    detail = data[:500].decode(errors="replace") if kind == FrameKind.REPORT else ""
                    raise SessionEnded("sandbox_error", f"the session's interpreter did not start {detail}".strip(),
                                       infra=True)
        except TimeoutError as exc:
            raise SessionEnded("sandbox_error", "the session's interpreter did not start in time", infra=True) from exc

    @property
    def alive(self) -> bool:
        return self._ended is None

    def usage(self) -> dict[str, int]:
        group = self._box.group
        return {"memory_bytes": group.held_bytes()} if group is not None and self._ended is None else {}

    async def exec(self, code: str, timeout_s: float) -> CellResult:
        async with self._lock:
            if self._ended is not None:
                raise self._ended
            box = self._box
            cell = json.dumps({"code": code, "timeout_s": timeout_s,
                               "output_bytes": self._limits.output_bytes}).encode()
            assert box.proc.stdin is not None
            try:
                box.proc.stdin.write(len(cell).to_bytes(4, "little") + cell)
                await box.proc.stdin.drain()
            except (ConnectionError, RuntimeError):
                await self._end(self._why_gone(None))
            try:
                async with asyncio.timeout(timeout_s + GRACE_S):
                    while True:
                        kind, data = await _read_capped(box.result, self._frame_cap)
                        if kind not in (FrameKind.STDOUT, FrameKind.STDERR):
                            break
            except TimeoutError:
                await self._end(SessionEnded("step_hung", f"a step did not stop within {GRACE_S:g}s of its time "
                                                          f"limit ({timeout_s:g}s) and was killed with its session"))
            if kind == ANSWER:
                try:
                    return _cell(data)
                except (ValueError, TypeError, UnicodeDecodeError):
                    pass
                await self._end(SessionEnded("protocol_error", "the session's interpreter sent an unreadable answer "
                                                               "(the program wrote to its answer pipe)"))
            if kind == b"!" or kind not in (FrameKind.CASE, b""):
                await self._end(SessionEnded("protocol_error", "the session's interpreter sent a frame it never sends "
                                                               "(over the size limit, or of another kind)"))
            header = json.loads(data) if kind == FrameKind.CASE else None
            await self._end(self._why_gone(header if isinstance(header, dict) else None))
            raise AssertionError("unreachable")  # _end raises

    def _why_gone(self, header: dict[str, Any] | None) -> SessionEnded:
        """Why the interpreter is gone, from the run manager's header for it (None: the sandbox itself went)."""
        group = self._box.group
        if group is not None and group.oom_kills() > self._box.oom_seen:
            return SessionEnded("memory_exceeded", f"the session used more than its {self._limits.memory_mb} MB "
                                                   "of memory and its interpreter was killed")
        if header is None:
            return SessionEnded("sandbox_error", "the session's sandbox ended unexpectedly", infra=True)
        sig = header.get("signal")
        if header.get("timed_out"):
            return SessionEnded("lifetime_exceeded", f"the session passed its lifetime of {self._limits.wall_s:g}s")
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and float(header.get("cpu_ms") or 0)
                                     >= self._limits.cpu_s * 1000.0):
            return SessionEnded("cpu_exceeded", f"the session used its {self._limits.cpu_s:g} CPU seconds")
        how = f"signal {sig}" if sig else f"exit status {header.get('exit_code')}"
        return SessionEnded("exited", f"the session's interpreter exited ({how})")

    async def _end(self, why: SessionEnded) -> None:
        """Record why (a close that came first stays the reason), free the sandbox, raise."""
        if self._ended is None:
            self._ended = why
        await self._release()
        raise self._ended

    async def _release(self) -> None:
        if not self._released:  # once: a close may race a step that finds the sandbox gone
            self._released = True
            self._box.reusable = False
            await self._pool.give_back(self._box)

    async def close(self) -> None:
        if self._ended is None:
            self._ended = SessionEnded("closed", "the session was closed")
            await asyncio.shield(self._release())
