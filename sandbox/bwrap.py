"""The default backend: bubblewrap namespaces + rlimits, with a warm pool of pre-started sandboxes.

Isolation model (README "Sandbox"): every run gets its own pid, net, mount, ipc, uts and user namespaces; the
system is visible read-only and only through an allow-list of directories; /work and /tmp are private size-capped
tmpfs mounts that vanish with the sandbox; the environment is cleared. When the service runs as root, bwrap runs
privileged and the supervisor drops to a uid of its own per sandbox (so RLIMIT_NPROC counts only that sandbox's
processes and no file owned by root is readable), then enters an unprivileged user namespace. Killing bwrap kills
the namespace's pid 1 and with it every process the program started, setsid or not.
"""
from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import logging
import os
import site
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from sandbox.api import Limits, RunRequest, RunResult, RunStatus
from sandbox.languages import ResolvedLanguage, canonical_name, resolve_all
from sandbox.limits import clamp
from sandbox.outcome import Observed, classify

log = logging.getLogger("sandbox.bwrap")

LAUNCHER = Path(__file__).with_name("launcher.py")
LAUNCHER_IN_SANDBOX = "/.sandbox/launcher.py"
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
                "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime", "/etc/passwd", "/etc/group")
SYSTEM_GLOBS = ("/etc/java-*", "/etc/ssl/certs")


@dataclass
class BwrapConfig:
    bwrap: str = "bwrap"
    caps: Limits = None  # type: ignore[assignment]  # the most any request may ask for
    defaults: Limits = None  # type: ignore[assignment]  # what a request that names no limits gets
    warm_pool: int = 4  # pre-started sandboxes waiting for a job
    max_concurrent: int = 0  # runs executing at once; 0 means 2 x CPU cores
    uid_base: int = 200_000  # root only: per-sandbox uids are uid_base .. uid_base + slots
    compile_wall_s: float = 60.0
    compile_memory_mb: int = 2048
    compile_output_bytes: int = 64 * 1024
    collect_bytes: int = 1 << 20
    tmp_mb: int = 256  # size of the sandbox's /tmp
    languages: list[str] | None = None  # None: every known language whose toolchain exists

    def __post_init__(self) -> None:
        self.caps = self.caps or Limits(wall_s=60, cpu_s=60, memory_mb=4096, processes=256, file_size_mb=256,
                                        open_files=1024, output_bytes=16 << 20, disk_mb=1024)
        self.defaults = self.defaults or clamp(Limits(), self.caps)
        if self.max_concurrent <= 0:
            self.max_concurrent = 2 * (os.cpu_count() or 1)


def _mount_args(paths: list[str]) -> list[str]:
    """--ro-bind each path (symlinks as symlinks), creating world-readable parents for deep ones like pyenv's."""
    args: list[str] = []
    made: set[str] = {"/"}
    bound: list[str] = []
    for path in paths:
        if not os.path.lexists(path) or any(path == b or path.startswith(b + "/") for b in bound):
            continue
        parent = os.path.dirname(path)
        chain = []
        while parent not in made and not any(parent == b or parent.startswith(b + "/") for b in bound):
            chain.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(chain):
            args += ["--perms", "0755", "--dir", d]
            made.add(d)
        if os.path.islink(path) and os.path.dirname(path) == "/":
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind", path, path]
            bound.append(path)
    return args


def _python_paths() -> tuple[list[str], list[str]]:
    """Directories the interpreter needs, and the site-packages a program may import from (numpy, ...)."""
    roots = {sys.base_prefix, sys.prefix, str(Path(os.path.realpath(sys.executable)).parent.parent)}
    packages = [p for p in site.getsitepackages() if os.path.isdir(p)]
    return sorted(roots), packages


class _Sandbox:
    """One started bwrap + supervisor, waiting for its single job."""

    def __init__(self, proc: asyncio.subprocess.Process, result: asyncio.StreamReader, transport: asyncio.BaseTransport,
                 uid: int | None) -> None:
        self.proc = proc
        self.result = result
        self.transport = transport
        self.uid = uid

    async def destroy(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            await self.proc.wait()
        self.transport.close()


async def _read_capped(stream: asyncio.StreamReader, cap: int, overflow: asyncio.Event) -> tuple[bytes, bool]:
    data = bytearray()
    truncated = False
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            return bytes(data), truncated
        if len(data) + len(chunk) > cap:
            data += chunk[: cap - len(data)]
            truncated = True
            overflow.set()
            # keep draining so the writer is never blocked on a full pipe before we kill it
        elif not truncated:
            data += chunk


class BwrapBackend:
    name = "bwrap"

    def __init__(self, config: BwrapConfig | None = None) -> None:
        self.config = config or BwrapConfig()
        self._langs: dict[str, ResolvedLanguage] = resolve_all(self.config.languages)
        roots, self._site_packages = _python_paths()
        lang_binds = [b for lang in self._langs.values() if lang.available for b in lang.binds]
        extra = [p for g in SYSTEM_GLOBS for p in sorted(glob.glob(g))]
        self._privileged = os.geteuid() == 0
        c = self.config
        self._argv_head = [
            c.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            *([] if self._privileged else ["--unshare-user"]),
            "--die-with-parent", "--new-session", "--clearenv", "--hostname", "sandbox",
            *(["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if self._privileged else []),
            *_mount_args([*SYSTEM_PATHS, *extra, *roots, *lang_binds]),
            "--perms", "0755", "--dir", "/.sandbox", "--ro-bind", str(LAUNCHER), LAUNCHER_IN_SANDBOX,
            "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(c.tmp_mb << 20), "--tmpfs", "/tmp",
            "--perms", "1777", "--size", str(c.caps.disk_mb << 20), "--tmpfs", "/work",
            "--chdir", "/work",
            "--setenv", "PATH", BASE_ENV["PATH"],
            sys.executable, "-S", "-I", LAUNCHER_IN_SANDBOX,
        ]
        slots = c.warm_pool + c.max_concurrent + 8
        self._free_uids = list(range(c.uid_base, c.uid_base + slots)) if self._privileged else []
        self._uid_available = asyncio.Condition() if self._privileged else None
        self._slots = asyncio.Semaphore(c.max_concurrent)
        self._warm: asyncio.Queue[_Sandbox] = asyncio.Queue()
        self._refill_task: asyncio.Task[None] | None = None
        self._refill_wanted = asyncio.Event()
        self._closed = False
        self.ready = self.config.warm_pool == 0
        self.last_error = ""
        self.stats = {"runs": 0, "warm_hits": 0, "cold_starts": 0, "sandbox_errors": 0}

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
            result = await self._run(request)
        except Exception as exc:  # noqa: BLE001 - a sandbox fault is a named status, never a crash
            log.exception("sandbox failure")
            result = RunResult(RunStatus.SANDBOX_ERROR, reason=f"sandbox failure: {type(exc).__name__}: {exc}")
        if result.status is RunStatus.SANDBOX_ERROR:
            self.stats["sandbox_errors"] += 1
        if not result.wall_ms:
            result.wall_ms = (time.perf_counter() - started) * 1000.0
        return result

    async def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        return list(await asyncio.gather(*(self.run(r) for r in requests)))

    async def close(self) -> None:
        self._closed = True
        if self._refill_task:
            self._refill_task.cancel()
            with contextlib.suppress(BaseException):
                await self._refill_task
        while not self._warm.empty():
            await self._release(self._warm.get_nowait())

    # --- pool -----------------------------------------------------------------------------------------------

    async def _take_uid(self) -> int | None:
        if not self._privileged:
            return None
        assert self._uid_available is not None
        async with self._uid_available:
            await self._uid_available.wait_for(lambda: bool(self._free_uids))
            return self._free_uids.pop()

    async def _release(self, box: _Sandbox) -> None:
        await box.destroy()
        if box.uid is not None and self._uid_available is not None:
            async with self._uid_available:
                self._free_uids.append(box.uid)
                self._uid_available.notify()

    async def _spawn(self) -> _Sandbox:
        uid = await self._take_uid()
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        try:
            ids = ["-", "-"] if uid is None else [str(uid), str(uid)]
            proc = await asyncio.create_subprocess_exec(
                *self._argv_head, str(w), *ids,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                pass_fds=(w,), start_new_session=True,
            )
        except BaseException:
            os.close(r)
            os.close(w)
            if uid is not None:
                self._free_uids.append(uid)
            raise
        os.close(w)
        reader = asyncio.StreamReader(limit=1 << 26)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(r, "rb", buffering=0)
        )
        box = _Sandbox(proc, reader, transport, uid)
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=30)
        except asyncio.TimeoutError:
            line = b""
        if line != b"R\n":
            err = b""
            with contextlib.suppress(Exception):
                await self._release(box)
                err = await proc.stderr.read()  # type: ignore[union-attr]
            raise SandboxStartError(err.decode(errors="replace").strip() or "the sandbox did not start")
        return box

    async def _refill_loop(self) -> None:
        while not self._closed:
            await self._refill_wanted.wait()
            self._refill_wanted.clear()
            while self._warm.qsize() < self.config.warm_pool and not self._closed:
                try:
                    self._warm.put_nowait(await self._spawn())
                except SandboxStartError as exc:
                    # Do not hold /readyz hostage: the rest of the service works, and runs say what is wrong.
                    log.error("cannot start a warm sandbox: %s", exc)
                    self.last_error = str(exc)
                    self.ready = True
                    await asyncio.sleep(1.0)
                    continue
                if self._warm.qsize() >= self.config.warm_pool:
                    self.ready = True

    async def _take(self) -> _Sandbox:
        self._refill_wanted.set()
        if not self._warm.empty():
            self.stats["warm_hits"] += 1
            return self._warm.get_nowait()
        self.stats["cold_starts"] += 1
        return await self._spawn()

    # --- one run ----------------------------------------------------------------------------------------------

    def _job(self, request: RunRequest, lang: ResolvedLanguage, limits: Limits) -> dict[str, object]:
        c = self.config
        spec = lang.spec
        src = spec.file_for(request.code)
        lim = {**asdict(limits), "memory_rlimit": spec.memory_rlimit}
        compile_limits = {**lim, "cpu_s": c.compile_wall_s, "memory_mb": max(c.compile_memory_mb, limits.memory_mb),
                          "processes": max(spec.compile_processes, limits.processes),
                          "file_size_mb": max(limits.file_size_mb, 256), "open_files": max(limits.open_files, 1024)}
        return {
            "files": {**request.files, src: request.code},
            "source_file": src,
            "stdin": request.stdin,
            "args": list(request.args),
            "env": {**BASE_ENV, **dict(spec.env)},
            "limits": lim,
            "compile": lang.command(spec.compile, request.code, limits.memory_mb) if spec.compile else None,
            "compile_limits": compile_limits,
            "compile_output_bytes": c.compile_output_bytes,
            "run": lang.command(spec.run, request.code, limits.memory_mb),
            "inline_python": spec.inline_python,
            "python_path": self._site_packages,
            "collect": list(request.collect),
            "collect_bytes": c.collect_bytes,
        }

    async def _run(self, request: RunRequest) -> RunResult:
        name = canonical_name(request.language)
        lang = self._langs.get(name)
        if lang is None:
            raise ValueError(f"unknown language {request.language!r}")  # callers validate first; see check_request
        if not lang.available:
            return RunResult(RunStatus.SANDBOX_ERROR, reason=f"{name} is not available on this host: {lang.reason}")
        limits = clamp(request.limits, self.config.caps)
        job = json.dumps(self._job(request, lang, limits)).encode()
        async with self._slots:
            self.stats["runs"] += 1
            box = await self._take()
            try:
                return await self._execute(box, job, limits, compiled=bool(lang.spec.compile))
            finally:
                await self._release(box)

    async def _execute(self, box: _Sandbox, job: bytes, limits: Limits, compiled: bool) -> RunResult:
        proc = box.proc
        assert proc.stdin and proc.stdout and proc.stderr
        overflow = asyncio.Event()
        out_task = asyncio.create_task(_read_capped(proc.stdout, limits.output_bytes, overflow))
        err_task = asyncio.create_task(_read_capped(proc.stderr, limits.output_bytes, overflow))
        t0 = time.perf_counter()
        proc.stdin.write(job)
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
        proc.stdin.close()

        timed_out = compile_timed_out = False
        report: dict[str, object] | None = None
        run_started = t0
        deadline = t0 + (self.config.compile_wall_s if compiled else limits.wall_s)
        overflow_wait = asyncio.create_task(overflow.wait())
        try:
            while True:
                line_task = asyncio.create_task(box.result.readline())
                timeout = max(0.0, deadline - time.perf_counter())
                done, _ = await asyncio.wait({line_task, overflow_wait}, timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                if line_task not in done:
                    line_task.cancel()
                    if overflow_wait not in done:
                        compile_timed_out = compiled and run_started == t0
                        timed_out = not compile_timed_out
                    break
                line = line_task.result()
                if line == b"C\n":
                    run_started = time.perf_counter()
                    deadline = run_started + limits.wall_s
                    continue
                if line.strip():
                    report = json.loads(line)
                break
        finally:
            overflow_wait.cancel()
        wall_ms = (time.perf_counter() - run_started) * 1000.0
        with contextlib.suppress(ProcessLookupError):
            proc.kill()  # the program's main process is done (or out of time): nothing it left behind survives
        stdout, out_trunc = await out_task
        stderr, err_trunc = await err_task
        await proc.wait()
        return self._result(report, stdout, stderr, out_trunc or err_trunc, wall_ms, limits,
                            timed_out=timed_out, compile_timed_out=compile_timed_out,
                            exited=proc.returncode)

    def _result(self, report: dict[str, object] | None, stdout: bytes, stderr: bytes, truncated: bool,
                wall_ms: float, limits: Limits, *, timed_out: bool, compile_timed_out: bool,
                exited: int | None) -> RunResult:
        out = stdout.decode("utf-8", "replace")
        err = stderr.decode("utf-8", "replace")
        if compile_timed_out:
            return RunResult(RunStatus.COMPILE_ERROR, stdout=out, stderr=err, truncated=truncated, wall_ms=wall_ms,
                             reason=f"compilation exceeded {self.config.compile_wall_s:g}s")
        if report is not None and report.get("phase") == "compile":
            return RunResult(RunStatus.COMPILE_ERROR, exit_code=report.get("exit_code"),  # type: ignore[arg-type]
                             signal=report.get("signal"), compile_output=str(report.get("compile_output", "")),  # type: ignore[arg-type]
                             wall_ms=wall_ms, reason="compilation failed")
        if report is None and not timed_out and not truncated:
            # The supervisor died before reporting. Only code inside the sandbox can do that (kill -9 -1 reaches it);
            # a sandbox that never started is caught in _spawn.
            return RunResult(RunStatus.RUNTIME_ERROR, stdout=out, stderr=err, wall_ms=wall_ms, signal=9,
                             reason="the program killed its own sandbox supervisor (e.g. kill -9 -1)")
        rep = report or {}
        observed = Observed(
            exit_code=rep.get("exit_code"), signal=rep.get("signal"),  # type: ignore[arg-type]
            cpu_ms=float(rep.get("cpu_ms", 0.0)), max_rss_kb=int(rep.get("max_rss_kb", 0)),  # type: ignore[arg-type]
            stderr=err, stdout_tail=out[-2000:], timed_out=timed_out, output_exceeded=truncated,
        )
        status, reason = classify(observed, limits)
        return RunResult(
            status, exit_code=observed.exit_code, signal=observed.signal if not timed_out else 9,
            stdout=out, stderr=err, wall_ms=wall_ms, cpu_ms=observed.cpu_ms, max_rss_kb=observed.max_rss_kb,
            truncated=truncated, compile_output=str(rep.get("compile_output", "")),
            files=dict(rep.get("files") or {}), reason=reason,  # type: ignore[arg-type]
        )


class SandboxStartError(RuntimeError):
    """bwrap (or the supervisor inside it) failed to start: the host's fault, reported as sandbox_error."""
