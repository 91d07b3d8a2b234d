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
job only after the supervisor's word that the last run's manager is gone and nothing of it is left ("Z").
Programs run with no capabilities, no_new_privs and the filter of ``sandbox.seccomp``; where the host has a memory
cgroup hierarchy, each sandbox gets its own group whose limit counts everything the run holds in RAM.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import glob
import json
import logging
import marshal
import os
import py_compile
import signal
import site
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TypedDict

from sandbox import seccomp
from sandbox.api import Limits, RunRequest, RunResult, RunStatus
from sandbox.cgroups import MemoryCgroups, MemoryGroup
from sandbox.fairslots import FairSlots, run_client, run_source
from sandbox.inside import SUPERVISOR
from sandbox.languages import ResolvedLanguage, canonical_name, resolve_all
from sandbox.limits import clamp, default_caps
from sandbox.outcome import Observed, as_sent, classify, sent_size
from sandbox.paths import collect_problem, files_problem
from sandbox.spawn import kill_and_wait, start_process

log = logging.getLogger("sandbox.bwrap")

SUPERVISOR_IN_SANDBOX = "/.sandbox/supervisor.py"
WORK_IN_SANDBOX = "/work"  # the program's work dir, where the supervisor writes its files
HOST_MOUNTS = "/.sandbox/host"  # where non-system directories (the interpreter's prefix, toolchains) are bound
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
# Read-only system paths every sandbox sees (missing ones are skipped). Deliberately not all of /etc.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache", "/etc/ld.so.conf",
                "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime")
SYSTEM_GLOBS = ("/etc/java-*", "/etc/ssl/certs")
SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/etc/")
# Where one run's time goes, as (from mark, to mark); see BwrapBackend.phase_ms.
PHASES = {"slot wait": ("admitted", "slot"), "warm take": ("slot", "taken"), "job write": ("write", "job_read"),
          "mount/setup": ("job_read", "set_up"), "compile": ("set_up", "started"), "program": ("started", "ended"),
          "report": ("ended", "reported"), "kill/drain": ("reported", "collected"),
          "teardown": ("collected", "released")}
OVERHEAD_MB = 64  # the supervisor's interpreter and kernel bookkeeping, on top of memory_mb + disk_mb
HELD_SLACK = 16 << 20  # memory a finished run may leave charged (the supervisor's own heap moving) before no reuse


def _compiled_supervisor(directory: str) -> tuple[str, str]:
    """(host path, sandbox path) of the supervisor to run: its bytecode, compiled once per backend, so no sandbox
    start compiles it again (Python never caches the bytecode of a main script; ~3.5 ms of CPU per start here). The
    sandbox runs the host's own interpreter, so the bytecode's magic matches; the source is the fallback."""
    target = os.path.join(directory, "supervisor.pyc")
    try:
        py_compile.compile(str(SUPERVISOR), cfile=target, dfile=SUPERVISOR_IN_SANDBOX, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    except (py_compile.PyCompileError, OSError) as exc:
        log.warning("running the sandbox supervisor from source: cannot compile it (%s)", exc)
        return str(SUPERVISOR), SUPERVISOR_IN_SANDBOX
    os.chmod(target, 0o644)
    return target, SUPERVISOR_IN_SANDBOX + "c"


class _Report(TypedDict, total=False):
    """A JSON line of the supervisor's (sandbox/inside/supervisor.py): the run's report, or a batch case's header."""

    phase: str  # "run", "compile", "setup" (then only ``error``) or "case"
    error: str
    marks: list[float]  # its CLOCK_MONOTONIC marks (see _supervisor_marks)
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
    output_exceeded: bool


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

    def __post_init__(self) -> None:
        self.caps = replace(self.caps, compile_s=self.compile_wall_s)  # the compile budget caps every request's
        self.defaults = self.defaults or clamp(Limits(), self.caps)
        if self.refill_parallel <= 0:
            self.refill_parallel = os.cpu_count() or 1
        if self.max_concurrent <= 0:
            self.max_concurrent = 2 * (os.cpu_count() or 1)


def _is_system(path: str) -> bool:
    return any((path + "/").startswith(p) for p in SYSTEM_PREFIXES)


class PathMap:
    """Host directories as the sandbox sees them: system ones at their own path, the rest under /.sandbox/host/N.

    Binding the interpreter's prefix at a neutral path keeps the host's layout (home directories, venv locations)
    out of the sandbox, and works where the host path is one the sandbox covers with its own mounts (a venv under
    /tmp, where pip, CI and many users put it)."""

    def __init__(self) -> None:
        self.binds: list[tuple[str, str]] = []  # (host, inside), in bind order
        self._neutral = 0

    def add(self, host: str) -> str:
        host = os.path.realpath(host)
        for src, dst in self.binds:
            if host == src or host.startswith(src + "/"):
                return dst + host[len(src):]
        if _is_system(host):
            inside = host
        else:
            inside = f"{HOST_MOUNTS}/{self._neutral}"
            self._neutral += 1
        self.binds.append((host, inside))
        return inside

    def inside(self, host: str) -> str:
        real = os.path.realpath(host)
        for src, dst in self.binds:
            if real == src or real.startswith(src + "/"):
                return dst + real[len(src):]
        return host


def _mount_args(paths: list[str], mapped: PathMap, files: list[tuple[str, str]]) -> list[str]:
    """--ro-bind each path (symlinks as symlinks), creating world-readable parents for deep ones."""
    args: list[str] = []
    made: set[str] = {"/"}
    bound: list[str] = []
    targets = [(p, p) for p in paths] + list(mapped.binds) + files
    for src, dest in targets:
        if not os.path.lexists(src) or any(dest == b or dest.startswith(b + "/") for b in bound):
            continue
        parent = os.path.dirname(dest)
        chain = []
        while parent not in made and not any(parent == b or parent.startswith(b + "/") for b in bound):
            chain.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(chain):
            args += ["--perms", "0755", "--dir", d]
            made.add(d)
        if src == dest and os.path.islink(src) and os.path.dirname(src) == "/":
            args += ["--symlink", os.readlink(src), src]
        else:
            args += ["--ro-bind", src, dest]
            bound.append(dest)
    return args


@dataclass
class PythonPaths:
    executable: str  # the base interpreter, as the sandbox sees it
    site_packages: list[str]  # as the sandbox sees them
    library_path: str  # LD_LIBRARY_PATH for a shared libpython bound away from its build path ("" if not needed)


def _python_paths(mapped: PathMap) -> PythonPaths:
    """The base interpreter (never a venv's shim: its pyvenv.cfg points at host paths) and the site-packages a
    program may import from (numpy, ...), bound through ``mapped``."""
    base_exe = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    root = prefix if base_exe.startswith(prefix + "/") else str(Path(base_exe).parent.parent)
    mapped.add(root)
    packages = [mapped.add(p) for p in site.getsitepackages() if os.path.isdir(p)]
    library_path = ""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir and mapped.inside(libdir) != os.path.realpath(libdir):
        library_path = mapped.add(libdir)
    return PythonPaths(mapped.inside(base_exe), packages, library_path)


def _etc_files(uids: list[int]) -> dict[str, str]:
    """A passwd and group of the sandbox's own: the host's users stay out of sight."""
    users = ["root:x:0:0:root:/root:/usr/sbin/nologin",
             *(f"sandbox:x:{u}:{u}:sandbox:/tmp:/usr/sbin/nologin" for u in uids),
             "nobody:x:65534:65534:nobody:/:/usr/sbin/nologin"]
    groups = ["root:x:0:", *(f"sandbox:x:{u}:" for u in uids), "nogroup:x:65534:"]
    return {"passwd": "\n".join(users) + "\n", "group": "\n".join(groups) + "\n",
            "hostname": "sandbox\n", "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
            "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n"}


def _ppid(pid: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


class _Sandbox:
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
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    async def destroy(self) -> None:
        self.kill()
        if self.supervisor is not None:
            os.close(self.supervisor)
            self.supervisor = None
        with contextlib.suppress(Exception):
            await self.proc.wait()
        self.transport.close()


async def _read_frame(stream: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One frame of the supervisor's (sandbox/inside/supervisor.py): (kind, data); (b"", b"") once it is gone."""
    try:
        head = await stream.readexactly(5)
        return head[:1], await stream.readexactly(int.from_bytes(head[1:], "little"))
    except asyncio.IncompleteReadError:
        return b"", b""


class BwrapBackend:
    name = "bwrap"

    def __init__(self, config: BwrapConfig | None = None) -> None:
        self.config = config or BwrapConfig()
        c = self.config
        self._langs: dict[str, ResolvedLanguage] = resolve_all(c.languages)
        mapped = PathMap()
        self._python = _python_paths(mapped)
        self._tools: dict[str, dict[str, str]] = {}
        for name, lang in self._langs.items():
            if lang.available:
                for b in lang.binds:
                    mapped.add(b)
                self._tools[name] = {tool: mapped.inside(path) for tool, path in lang.tools.items()}
        self._env = {**BASE_ENV, **({"LD_LIBRARY_PATH": self._python.library_path} if self._python.library_path
                                    else {})}
        extra = [p for g in SYSTEM_GLOBS for p in sorted(glob.glob(g))]
        self._privileged = os.geteuid() == 0
        slots = c.warm_pool + c.max_concurrent + 8
        self._free_uids = list(range(c.uid_base, c.uid_base + slots)) if self._privileged else []
        self._etc = tempfile.mkdtemp(prefix="reward-sandbox-etc-")
        for name, text in _etc_files(self._free_uids or [os.getuid()]).items():
            Path(self._etc, name).write_text(text)
            os.chmod(Path(self._etc, name), 0o644)
        etc_binds = [(str(Path(self._etc, name)), f"/etc/{name}") for name in sorted(os.listdir(self._etc))]
        supervisor, supervisor_inside = _compiled_supervisor(self._etc)
        self._cgroups: MemoryCgroups | None = None
        self._cgroup_reason = "disabled in the configuration (memory_cgroup=off)"
        if c.memory_cgroup != "off":
            self._cgroups, self._cgroup_reason = MemoryCgroups.detect(None if c.memory_cgroup == "auto"
                                                                      else c.memory_cgroup)
        self._filter = seccomp.build(refuse_memfd=self._cgroups is None)
        self._argv_head = [
            c.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            *([] if self._privileged else ["--unshare-user"]),
            "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv", "--hostname", "sandbox",
            # CAP_SYS_ADMIN only for the supervisor's first steps, as root in bwrap's mount namespace: it unmounts
            # what bwrap binds over parts of /proc (supervisor._uncover_proc), then drops every capability with its uid
            *(["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SYS_ADMIN"]
              if self._privileged else []),
            *_mount_args([*SYSTEM_PATHS, *extra], mapped, etc_binds),
            "--perms", "0755", "--dir", "/.sandbox", "--ro-bind", supervisor, supervisor_inside,
            "--proc", "/proc", "--dev", "/dev",
            # mount points only: the supervisor mounts the run's own tmpfs on them when the job (and its disk_mb) is in
            "--perms", "0755", "--dir", "/.rw", "--perms", "0755", "--dir", "/work", "--perms", "1777", "--dir", "/tmp",
            "--chdir", "/work",
            "--setenv", "PATH", BASE_ENV["PATH"],
            *(["--setenv", "LD_LIBRARY_PATH", self._python.library_path] if self._python.library_path else []),
            self._python.executable, "-S", "-I", supervisor_inside,
        ]
        self._uid_available = asyncio.Condition() if self._privileged else None
        self._slots = FairSlots(c.max_concurrent)  # taken in turns by source (fairslots.run_source)
        self._warm: asyncio.Queue[_Sandbox] = asyncio.Queue()
        self._refill_task: asyncio.Task[None] | None = None
        self._refill_wanted = asyncio.Event()
        self._closed = False
        self.ready = self.config.warm_pool == 0
        self.last_error = ""
        self._busy_reusable = 0  # sandboxes running a job that may come back to the pool after it
        self._single_use_logged = False
        self.stats = {"runs": 0, "warm_hits": 0, "cold_starts": 0, "sandbox_errors": 0, "reuses": 0}
        self.phase_ms: dict[str, float] = {}  # summed per phase of PHASES, plus "runs", "spawns" and "spawn

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
            "network": "none (a network namespace of each run's own, with only loopback)",
            "reuse": (f"a sandbox serves up to {self.config.reuse_runs} runs, each in its own pid, network, mount and "
                      "IPC namespaces and tmpfs, served by a manager forked from a supervisor that never reads a job"),
            "last_error": self.last_error,
        }

    @property
    def not_ready_reason(self) -> str:
        return "" if self.ready else (f"cannot start a sandbox: {self.last_error}" if self.last_error else "")

    # --- the Backend protocol -------------------------------------------------------------------------------

    def languages(self) -> dict[str, bool]:
        return {name: lang.available for name, lang in self._langs.items()}

    def language_info(self) -> dict[str, dict[str, object]]:
        return {name: {"available": lang.available, "compiled": bool(lang.spec.compile), "reason": lang.reason,
                       "file": lang.spec.source_file, "aliases": list(lang.spec.aliases)}
                for name, lang in self._langs.items()}

    async def start(self) -> None:
        """Fill the warm pool once (so /readyz means "runs are fast now") and keep it filled."""
        if self.config.warm_pool > 0 and self._refill_task is None:
            self._refill_task = asyncio.create_task(self._refill_loop())
            self._refill_wanted.set()

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

    async def close(self) -> None:
        self._closed = True
        if self._refill_task:
            self._refill_task.cancel()
            with contextlib.suppress(BaseException):
                await self._refill_task
        while not self._warm.empty():
            await self._release(self._warm.get_nowait())
        if self._cgroups is not None:
            self._cgroups.close()
        with contextlib.suppress(OSError):
            for name in os.listdir(self._etc):
                os.unlink(os.path.join(self._etc, name))
            os.rmdir(self._etc)

    # --- pool -----------------------------------------------------------------------------------------------

    async def _take_uid(self) -> int | None:
        if not self._privileged:
            return None
        assert self._uid_available is not None
        async with self._uid_available:
            await self._uid_available.wait_for(lambda: bool(self._free_uids))
            return self._free_uids.pop()

    async def _release(self, box: _Sandbox) -> None:
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

    async def _spawn(self) -> _Sandbox:
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

    async def _start_box(self) -> _Sandbox:
        uid = await self._take_uid()
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        group: MemoryGroup | None = None
        try:
            ids = ["-", "-"] if uid is None else [str(uid), str(uid)]
            argv = [*self._argv_head, str(w), *ids]
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
        box = _Sandbox(proc, reader, transport, uid, group, runs_left=self.config.reuse_runs)
        try:
            kind, data = await asyncio.wait_for(_read_frame(reader), timeout=30)
        except TimeoutError:
            kind, data = b"", b""
        except BaseException:  # cancelled (shutdown): never leave a half-started sandbox behind
            await asyncio.shield(self._release(box))
            raise
        if kind == b"R":
            box.find_supervisor()
            if group is not None:
                box.held_base = group.held_bytes()
            if data:  # the supervisor cannot seal its base: every run of it would see what the last one left
                box.runs_left = 1
                if not self._single_use_logged:
                    log.warning("sandboxes serve one run each: %s", data.decode(errors="replace"))
                    self._single_use_logged = True
        if kind != b"R":
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
                    if isinstance(box, _Sandbox):
                        self._warm.put_nowait(box)
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
        return self.config.warm_pool - self._warm.qsize() - self._busy_reusable

    async def _take(self, fresh: bool = False) -> _Sandbox:
        box = None
        while box is None and not fresh and not self._warm.empty():
            box = self._warm.get_nowait()
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
        self._refill_wanted.set()
        return box

    async def _give_back(self, box: _Sandbox) -> None:
        """After a run: back to the pool if nothing of the run is left and the pool has room, else gone."""
        if box.runs_left > 0:
            self._busy_reusable -= 1
        if (box.reusable and box.runs_left > 0 and not self._closed
                and self._warm.qsize() < max(self.config.warm_pool, self.config.max_concurrent)):
            self.stats["reuses"] += 1
            self._warm.put_nowait(box)
            return
        await self._release(box)
        self._refill_wanted.set()

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
        tools = self._tools.get(lang.spec.name, {})
        py = self._python.executable
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
            "env": {**self._env, **dict(spec.env)},
            "limits": lim,
            "compile": lang.command(spec.compile, request.code, limits.memory_mb, py, tools) if spec.compile else None,
            "compile_limits": compile_limits,
            "compile_output_bytes": c.compile_output_bytes,
            "run": lang.command(spec.run, request.code, limits.memory_mb, py, tools),
            "inline_python": spec.inline_python,
            "code_object": (_compiled(request.code, f"{WORK_IN_SANDBOX}/{src}")
                            if request.precompiled and spec.inline_python else b""),
            "python_path": self._python.site_packages,
            "collect": list(request.collect),
            "collect_bytes": c.collect_bytes,
            "collect_budget": limits.output_bytes,  # all collected files together: the run's output budget
            "disk_bytes": limits.disk_mb << 20,
            "inodes": max(4096, limits.disk_mb * 256),
            "seccomp": self._filter.program.hex() if self._filter else "",
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
        problem = files_problem(list(request.files), program=lang.spec.file_for(request.code)) or collect_problem(
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
        async with self._slots.hold(run_source.get() or object(), run_client.get()):
            self.stats["runs"] += 1
            marks["slot"] = time.perf_counter()
            first = await self._take()
            box: _Sandbox | None = first
            marks["taken"] = time.perf_counter()
            try:
                try:
                    result = await self._execute(first, payload, limits, compiled=bool(lang.spec.compile), marks=marks,
                                                 cases=cases)
                except _LimitRefused as exc:
                    # a sandbox whose group cannot take this run's limit (memory still charged to it): a fresh one
                    log.info("replacing a sandbox whose memory limit cannot be set: %s", exc)
                    box = None
                    await self._give_back(first)
                    box = fresh = await self._take(fresh=True)
                    result = await self._execute(fresh, payload, limits, compiled=bool(lang.spec.compile), marks=marks,
                                                 cases=cases)
                return cases or [], result
            finally:
                if box is not None:
                    await self._give_back(box)
                marks["released"] = time.perf_counter()
                self._account(marks)

    def _account(self, marks: dict[str, float]) -> None:
        """Add one run's phases to ``phase_ms`` (benchmarks print where the time goes); a phase whose marks are
        missing (a run that failed early) is skipped."""
        for phase, (start, end) in PHASES.items():
            if start in marks and end in marks:
                self.phase_ms[phase] = self.phase_ms.get(phase, 0.0) + (marks[end] - marks[start]) * 1000.0
        self.phase_ms["runs"] = self.phase_ms.get("runs", 0.0) + 1

    def _memory_limit_mb(self, limits: Limits, compiling: bool) -> int:
        memory = max(self.config.compile_memory_mb, limits.memory_mb) if compiling else limits.memory_mb
        return memory + limits.disk_mb + OVERHEAD_MB

    async def _execute(self, box: _Sandbox, job: bytes, limits: Limits, compiled: bool,
                       marks: dict[str, float] | None = None, cases: list[RunResult] | None = None) -> RunResult:
        """Hand the job over and read the frames of the run's manager until its report ("D"), then the
        supervisor's end of the run ("Z"). In batch mode (``cases``) each case's result is appended to ``cases`` as
        its header arrives. The manager keeps each case's wall clock; the host keeps a backstop (the compile budget,
        then the run's clock and a grace) and destroys a sandbox that overruns it, or whose supervisor did not say,
        once the manager was gone, that the sandbox can serve another run."""
        marks = {} if marks is None else marks
        loop = asyncio.get_running_loop()
        backstop = limits.wall_s + 2.0 if cases is None else self.config.batch_budget_s + limits.wall_s + 5.0
        proc = box.proc
        assert proc.stdin
        cgroup_mb = 0
        if box.group is not None:
            cgroup_mb = self._memory_limit_mb(limits, compiling=compiled)
            try:
                box.group.set_limit(cgroup_mb << 20)
            except OSError as exc:  # more is charged to the group than the limit (EBUSY): nothing was sent yet
                raise _LimitRefused(exc.strerror or str(exc)) from exc
            box.oom_seen = box.group.oom_kills()
        t0 = marks["write"] = time.perf_counter()
        proc.stdin.write(job)
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
        out, err = bytearray(), bytearray()
        got = _Frames()
        started = timed_out = False
        try:
            async with asyncio.timeout_at(loop.time() + (limits.compile_s if compiled else backstop)) as clock:
                while True:
                    kind, data = await _read_frame(box.result)
                    if kind == b"O":
                        out += data
                    elif kind == b"E":
                        err += data
                    elif kind == b"H":
                        case = self._case(box, json.loads(data), bytes(out), bytes(err), limits, cgroup_mb)
                        out, err = bytearray(), bytearray()
                        if cases is None:
                            got.single = case
                        else:
                            cases.append(case)
                    elif kind == b"C":
                        if compiled and box.group is not None:
                            cgroup_mb = self._memory_limit_mb(limits, compiling=False)
                            failed = await self._lower_after_compile(box, box.group, cgroup_mb)
                            if failed is not None:
                                return failed
                        started = True
                        clock.reschedule(loop.time() + backstop)
                    elif kind == b"c":
                        got.compile_output = data.decode("utf-8", "replace")
                    elif kind == b"F":
                        got.collected(data, limits.output_bytes)
                    elif kind == b"D" and got.report is None:
                        marks["reported"] = time.perf_counter()
                        got.report = json.loads(data)
                        _supervisor_marks(got.report, marks)
                    else:  # "Z", the run is over: its data says why the sandbox must go, if so; or b"" (the
                        # supervisor is gone) or a frame that never comes here
                        got.clean = kind == b"Z" and not data and got.report is not None
                        break
        except TimeoutError:
            timed_out = True
        box.reusable = got.clean and not timed_out and await self._holds_nothing(box)
        if not box.reusable:
            box.kill()  # whatever is left of the run dies with its supervisor
        marks["collected"] = time.perf_counter()
        compile_timed_out = timed_out and compiled and not started
        oom = (box.group is not None and got.single is None and box.group.oom_kills() > box.oom_seen)
        return self._result(got, cases is not None, limits, wall_ms=(time.perf_counter() - t0) * 1000.0,
                            timed_out=timed_out and not compile_timed_out, compile_timed_out=compile_timed_out,
                            oom_killed=oom, cgroup_mb=cgroup_mb, out=bytes(out), err=bytes(err))

    def _result(self, got: _Frames, batch: bool, limits: Limits, *, wall_ms: float, timed_out: bool,
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

    async def _holds_nothing(self, box: _Sandbox) -> bool:
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

    async def _lower_after_compile(self, box: _Sandbox, group: MemoryGroup, cgroup_mb: int) -> RunResult | None:
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
        box.proc.stdin.write(b"G")
        with contextlib.suppress(ConnectionError):
            await box.proc.stdin.drain()
        return None

    def _case(self, box: _Sandbox, header: _Report, out: bytes, err: bytes, limits: Limits,
              cgroup_mb: int) -> RunResult:
        """One case's result from its header and output; an OOM kill since the last case is its own."""
        oom = False
        if box.group is not None:
            kills = box.group.oom_kills()
            oom, box.oom_seen = kills > box.oom_seen, kills
        return _classified(header, out, err, bool(header.get("output_exceeded")), float(header.get("wall_ms", 0.0)),
                           limits, timed_out=bool(header.get("timed_out")), oom_killed=oom, cgroup_mb=cgroup_mb)


@dataclass
class _Frames:
    """What the supervisor reported of one run besides its output."""

    report: _Report | None = None
    clean: bool = False  # the supervisor said the sandbox can serve another run
    single: RunResult | None = None  # a single run's program outcome (its one case)
    compile_output: str = ""
    files: dict[str, str] = field(default_factory=dict)
    file_bytes: int = 0  # the collected files' bytes so far
    over_budget: bool = False  # more than the budget (as the answer sends it) came: the rest was not kept

    def collected(self, data: bytes, budget: int) -> None:
        """One "F" frame (name length, name, contents), kept only within the run's output budget: the host never
        holds more of a run's files than that, whatever the supervisor sends."""
        size = int.from_bytes(data[:2], "little")
        if self.file_bytes >= budget:
            self.over_budget = True
            return
        text, cut = as_sent(data[2 + size:], budget - self.file_bytes)
        self.over_budget = self.over_budget or cut
        self.file_bytes += sent_size(text)
        self.files[data[2:2 + size].decode(errors="replace")] = text


def _with_collect_report(result: RunResult, report: _Report, over_budget: bool) -> RunResult:
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


def _classified(rep: _Report, stdout: bytes, stderr: bytes, truncated: bool, wall_ms: float, limits: Limits, *,
                timed_out: bool, oom_killed: bool, cgroup_mb: int) -> RunResult:
    """What the supervisor saw of one program process, named (``sandbox.outcome.classify``); each stream within
    the output budget as the answer sends it."""
    out, out_cut = as_sent(stdout, limits.output_bytes)
    err, err_cut = as_sent(stderr, limits.output_bytes)
    truncated = truncated or out_cut or err_cut
    observed = Observed(
        exit_code=rep.get("exit_code"), signal=rep.get("signal"),
        cpu_ms=float(rep.get("cpu_ms", 0.0)), max_rss_kb=int(rep.get("max_rss_kb", 0)),
        stderr=err, stdout_tail=out[-2000:], timed_out=timed_out, output_exceeded=truncated,
        oom_killed=oom_killed, cgroup_limit_mb=cgroup_mb,
    )
    status, reason = classify(observed, limits)
    return RunResult(
        status, exit_code=observed.exit_code, signal=observed.signal if not (timed_out or oom_killed) else 9,
        stdout=out, stderr=err, wall_ms=wall_ms, cpu_ms=observed.cpu_ms, max_rss_kb=observed.max_rss_kb,
        truncated=truncated, compile_output=str(rep.get("compile_output", "")),
        files=dict(rep.get("files") or {}), reason=reason,
    )


@functools.lru_cache(maxsize=8)
def _compiled(source: str, path: str) -> bytes:
    """A trusted program's code object (``RunRequest.precompiled``), marshalled for the supervisor (this
    interpreter's format)."""
    return marshal.dumps(compile(source, path, "exec"))


def _supervisor_marks(report: _Report, marks: dict[str, float]) -> None:
    """The supervisor's CLOCK_MONOTONIC marks (job read, set up, program started, program ended), which is the
    clock of ``time.perf_counter`` here: accepted only in order and inside this run's window."""
    got = report.pop("marks", None)
    names = ("job_read", "set_up", "started", "ended")
    if (isinstance(got, list) and len(got) == len(names) and all(isinstance(t, float) for t in got)
            and marks["write"] <= got[0] <= got[1] <= got[2] <= got[3] <= marks["reported"]):
        marks.update(zip(names, got))


class _LimitRefused(Exception):
    """The sandbox's memory cgroup refused the run's limit before the job was sent: the run needs another sandbox."""


class SandboxStartError(RuntimeError):
    """bwrap (or the supervisor inside it) failed to start: the host's fault, reported as sandbox_error."""
