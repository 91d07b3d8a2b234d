"""The warm pool: sandboxes started ahead, each serving up to ``reuse_runs`` runs one after another, taken for a
run and given back after it when nothing of the run is left, refilled in the background."""
from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Coroutine
from pathlib import Path

from sandbox.bwrap.config import BwrapConfig
from sandbox.bwrap.frames import FrameKind, read_frame
from sandbox.bwrap.layout import BASE_ENV
from sandbox.cgroups import MemoryCgroups, MemoryGroup
from sandbox.spawn import kill_and_wait, kill_child, start_process

log = logging.getLogger("sandbox.bwrap")

# How long a run waits for a sandbox that is settling after its last run when none is idle, before it starts one
SETTLE_WAIT_S = 1.0


class SandboxStartError(RuntimeError):
    """bwrap (or the supervisor inside it) failed to start: the host's fault, reported as sandbox_error."""


def _ppid(pid: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


class Sandbox:
    """One started bwrap + supervisor, serving runs one after another (``runs_left`` of them at most)."""

    def __init__(self, proc: asyncio.subprocess.Process, result: asyncio.StreamReader, transport: asyncio.BaseTransport,
                 uid: int | None, group: MemoryGroup | None = None, runs_left: int = 1) -> None:
        self.proc = proc
        self.result = result
        self.transport = transport
        self.uid = uid
        self.group = group
        self.supervisor: int | None = None  # a pidfd of the supervisor, the sandbox's pid 1
        self.oom_seen = 0  # the memory cgroup's OOM kills already accounted for (earlier runs and cases)
        self.runs_left = runs_left
        self.held_base = 0  # what the idle supervisor holds in its memory cgroup (MemoryGroup.held_bytes)
        # True only after a run whose manager reported and exited, and the supervisor said nothing of it is left
        self.reusable = False
        # after a run's report: what is left to wait for before the sandbox may serve another (job.settle)
        self.settling: Coroutine[None, None, None] | None = None

    def find_supervisor(self) -> None:
        """Hold a pidfd of bwrap's child. The supervisor runs under another uid, so bwrap (which keeps no CAP_KILL)
        cannot deliver its parent-death signal; the host kills it itself, by pidfd so a reused pid is never hit."""
        pid = self.proc.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = [p for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == pid]
        if children:
            with contextlib.suppress(OSError):
                self.supervisor = os.pidfd_open(int(children[0]))

    def kill(self) -> None:
        """The supervisor first: as the namespace's pid 1 its death takes every process of the program with it."""
        if self.supervisor is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.supervisor, signal.SIGKILL)
        kill_child(self.proc)

    async def destroy(self) -> None:
        self.kill()
        if self.supervisor is not None:
            os.close(self.supervisor)
            self.supervisor = None
        try:
            with contextlib.suppress(Exception):
                await kill_and_wait(self.proc)
        finally:
            self.transport.close()


class WarmPool:
    """Started sandboxes waiting for a job. ``uids``: one per sandbox when the service runs as root (each sandbox
    drops to its own), else empty; ``stats`` and ``phase_ms`` are the backend's, counted here too."""

    def __init__(self, config: BwrapConfig, argv_head: list[str], cgroups: MemoryCgroups | None, uids: list[int],
                 stats: dict[str, int], phase_ms: dict[str, float], argv_tail: tuple[str, ...] = ()) -> None:
        self.config = config
        self.argv_head = argv_head
        self.argv_tail = argv_tail  # the supervisor's arguments after the result fd, uid and gid
        self._cgroups = cgroups
        self._privileged = bool(uids)
        self._free_uids = uids
        self._uid_available = asyncio.Condition() if self._privileged else None
        self.warm: asyncio.Queue[Sandbox] = asyncio.Queue()
        self._refill_task: asyncio.Task[None] | None = None
        self._refill_wanted = asyncio.Event()
        self._closed = False
        self.ready = config.warm_pool == 0
        self.last_error = ""
        self._busy_reusable = 0  # sandboxes running a job that may come back to the pool after it
        self._single_use_logged = False
        self.stats = stats
        self.phase_ms = phase_ms
        self._settling: set[asyncio.Task[None]] = set()  # sandboxes on their way back after a run (give_back)

    async def start(self) -> None:
        """Fill the warm pool once (so /readyz means "runs are fast now") and keep it filled."""
        if self.config.warm_pool > 0 and self._refill_task is None:
            self._refill_task = asyncio.create_task(self._refill_loop())
            self._refill_wanted.set()

    async def close(self) -> None:
        """No more sandboxes: the refill stops and every idle one is destroyed."""
        self._closed = True
        if self._refill_task:
            self._refill_task.cancel()
            with contextlib.suppress(BaseException):
                await self._refill_task
        await self.settled()
        while not self.warm.empty():
            await self._release(self.warm.get_nowait())

    async def settled(self) -> None:
        """Every sandbox that was settling after its run is back in the pool or gone."""
        while self._settling:
            await asyncio.gather(*self._settling, return_exceptions=True)

    async def _take_uid(self) -> int | None:
        if not self._privileged:
            return None
        assert self._uid_available is not None
        async with self._uid_available:
            await self._uid_available.wait_for(lambda: bool(self._free_uids))
            return self._free_uids.pop()

    async def _release(self, box: Sandbox) -> None:
        if box.supervisor is None and box.group is not None:
            # Cancelled before the supervisor announced itself: it may not have its parent-death signal yet, and
            # would outlive bwrap holding the output pipes (whose closing the wait for bwrap needs).
            box.group.kill_all()
        await box.destroy()
        if box.group is not None and self._cgroups is not None:
            self._cgroups.release(box.group)
        if box.uid is not None and self._uid_available is not None:
            async with self._uid_available:
                self._free_uids.append(box.uid)
                self._uid_available.notify()

    async def _spawn(self) -> Sandbox:
        started = time.perf_counter()
        box = await self._start_box()
        self.phase_ms["spawn"] = self.phase_ms.get("spawn", 0.0) + (time.perf_counter() - started) * 1000.0
        self.phase_ms["spawns"] = self.phase_ms.get("spawns", 0.0) + 1
        return box

    @staticmethod
    async def _abandon(group: MemoryGroup | None, proc: asyncio.subprocess.Process) -> None:
        """A sandbox whose start was cancelled before it announced itself: its supervisor may not have its
        parent-death signal yet and would outlive bwrap holding the pipes, so its whole group dies first."""
        if group is not None:
            group.kill_all()
        await kill_and_wait(proc)

    async def _start_box(self) -> Sandbox:
        uid = await self._take_uid()
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        group: MemoryGroup | None = None
        try:
            ids = ["-", "-"] if uid is None else [str(uid), str(uid)]
            argv = [*self.argv_head, str(w), *ids, *self.argv_tail]
            if self._cgroups is not None:
                group = self._cgroups.create()
                # join the group before bwrap exists, so every process of the sandbox is born inside it
                argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group.procs), *argv]
            proc = await start_process(
                *argv, abandon=functools.partial(self._abandon, group), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                pass_fds=(w,), start_new_session=True, env={"PATH": BASE_ENV["PATH"]},
            )
        except BaseException:
            os.close(r)
            os.close(w)
            if group is not None and self._cgroups is not None:
                self._cgroups.release(group)
            if uid is not None:
                self._free_uids.append(uid)
            raise
        os.close(w)
        reader = asyncio.StreamReader(limit=1 << 26)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(r, "rb", buffering=0)
        )
        box = Sandbox(proc, reader, transport, uid, group, runs_left=self.config.reuse_runs)
        try:
            kind, data = await asyncio.wait_for(read_frame(reader), timeout=30)
        except TimeoutError:
            kind, data = b"", b""
        except BaseException:  # cancelled (shutdown): never leave a half-started sandbox behind
            await asyncio.shield(self._release(box))
            raise
        if kind == FrameKind.READY:
            box.find_supervisor()
            if group is not None:
                box.held_base = group.held_bytes()
            if data:  # the supervisor cannot seal its base: every run of it would see what the last one left
                box.runs_left = 1
                if not self._single_use_logged:
                    log.warning("sandboxes serve one run each: %s", data.decode(errors="replace"))
                    self._single_use_logged = True
        if kind != FrameKind.READY:
            err = b""
            with contextlib.suppress(Exception):
                await self._release(box)
                if proc.stderr is not None:  # always a pipe
                    err = await proc.stderr.read()
            raise SandboxStartError(err.decode(errors="replace").strip() or "the sandbox did not start")
        return box

    async def _refill_loop(self) -> None:
        backoff = 1.0
        while not self._closed:
            await self._refill_wanted.wait()
            self._refill_wanted.clear()
            while self._missing() > 0 and not self._closed:
                # Several at once: one at a time refills at the pace of one start's latency, slower than concurrent
                # runs drain the pool, and every run that finds it empty pays a cold start inside its slot.
                want = min(self._missing(), self.config.refill_parallel)
                started = await asyncio.gather(*(self._spawn() for _ in range(want)), return_exceptions=True)
                for box in started:
                    if isinstance(box, Sandbox):
                        self.warm.put_nowait(box)
                exc = next((e for e in started if isinstance(e, BaseException)), None)
                if exc is not None and not isinstance(exc, SandboxStartError):
                    raise exc
                if exc is not None:
                    # Not ready, and saying why (/readyz names it); log a new reason at once, a repeated one rarely.
                    if str(exc) != self.last_error:
                        log.error("cannot start a warm sandbox: %s", exc)
                    self.last_error = str(exc)
                    self.ready = False
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 60.0)
                    continue
                backoff = 1.0
                if self.last_error:
                    log.info("warm sandboxes start again")
                    self.last_error = ""
                if self._missing() <= 0:
                    self.ready = True

    def _missing(self) -> int:
        """Sandboxes to start: the pool counts the idle ones and those serving a run that will come back after it."""
        return self.config.warm_pool - self.warm.qsize() - self._busy_reusable

    def refill(self) -> None:
        """Start the sandboxes the pool misses (``take(refill=False)`` leaves it to the caller)."""
        self._refill_wanted.set()

    async def take(self, fresh: bool = False, refill: bool = True) -> Sandbox:
        """A warm sandbox, else one that is settling after its last run (a wait of a few milliseconds, against a
        cold start's tens), else a new one. ``refill=False``: the pool is refilled only when the caller says
        (``refill``), so a start that competes for the CPU does not slow the caller's own first steps."""
        box = None
        settle_until = time.monotonic() + SETTLE_WAIT_S
        while box is None and not fresh:
            if self.warm.empty():
                left = settle_until - time.monotonic()
                if not self._settling or left <= 0:
                    break
                await asyncio.wait(set(self._settling), timeout=left, return_when=asyncio.FIRST_COMPLETED)
                continue
            box = self.warm.get_nowait()
            if box.proc.returncode is not None:  # died while idle (killed from outside): never hand it a job
                await self._release(box)
                box = None
        if box is not None:
            self.stats["warm_hits"] += 1
        else:
            self.stats["cold_starts"] += 1
            box = await self._spawn()
        box.runs_left -= 1
        box.reusable = False
        if box.runs_left > 0:
            self._busy_reusable += 1
        if refill:
            self._refill_wanted.set()
        return box

    async def give_back(self, box: Sandbox) -> None:
        """After a run: back to the pool if nothing of the run is left and the pool has room, else gone. A sandbox
        still settling (its supervisor has yet to say it can serve another run) comes back once it has, in a task of
        its own: the run's caller has its answer already."""
        if box.settling is not None:
            settling, box.settling = box.settling, None
            task = asyncio.create_task(self._settle_then_give_back(box, settling))
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)
            return
        if box.runs_left > 0:
            self._busy_reusable -= 1
        if (box.reusable and box.runs_left > 0 and not self._closed
                and self.warm.qsize() < max(self.config.warm_pool, self.config.max_concurrent)):
            self.stats["reuses"] += 1
            self.warm.put_nowait(box)
            return
        await self._release(box)
        self._refill_wanted.set()

    async def _settle_then_give_back(self, box: Sandbox, settling: Coroutine[None, None, None]) -> None:
        try:
            await settling
        finally:
            await asyncio.shield(self.give_back(box))
