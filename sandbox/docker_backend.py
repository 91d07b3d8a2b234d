"""A container backend through the docker SDK, for hosts that prefer containers over bubblewrap.

One container per run: no network, read-only root, a size-capped tmpfs work dir, memory and pids limits, all
capabilities dropped, no-new-privileges. The program, its files, stdin and arguments go in base64 through the
container's command line (no bind mounts of host paths), so the backend also works against a remote engine: as
separate arguments of at most 96 KiB each (Linux refuses a single argument over 128 KiB), and at most
``MAX_COMMAND_BYTES`` in all (the kernel's limit on a command line is 2 MiB with the default stack). Output is read
back capped at ``output_bytes`` per stream, and the engine keeps at most a few times that on disk (a json-file log of
bounded size), so a program printing without end costs neither the host's memory nor the engine's disk. Files
cannot be collected: nothing leaves a container but its output, which the program controls. Slower than bwrap
(container start is ~0.5 s).
"""
from __future__ import annotations

import asyncio
import base64
import os
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from sandbox.api import Backend, Limits, RunRequest, RunResult, RunStatus
from sandbox.limits import clamp, default_caps
from sandbox.outcome import Observed, classify

# image per language; each must hold the toolchain. Compile-and-run in one shell line; the compile step runs under
# coreutils' timeout (exit 124 when it ran out of Limits.compile_s).
_COMPILE = "timeout {compile_s} "
_COMPILED = " 2>/tmp/cc; rc=$?; [ $rc = 124 ] && exit 218; [ $rc != 0 ] && { cat /tmp/cc >&2; exit 217; }; ./main"
IMAGES = {
    "python": ("python:3.11-slim", "main.py", "python3 main.py"),
    "c": ("gcc:13", "main.c", f"{_COMPILE}gcc -O2 -o main main.c -lm{_COMPILED}"),
    "cpp": ("gcc:13", "main.cpp", f"{_COMPILE}g++ -O2 -o main main.cpp{_COMPILED}"),
    "javascript": ("node:20-slim", "main.js", "node main.js"),
    "bash": ("bash:5", "main.sh", "bash main.sh"),
}
COMPILE_FAILED = 217
COMPILE_TIMED_OUT = 218
UNPACK_FAILED = 219
CHUNK_BYTES = 72 * 1024  # raw bytes per command-line argument: 96 KiB of base64, under the kernel's 128 KiB
MAX_COMMAND_BYTES = 1536 * 1024  # all arguments together, under the 2 MiB limit with room for the environment
STDIN_FILE = "/tmp/.stdin"  # outside the work dir, so no file of the request's can clash with it
COLLECT_REFUSED = ("the docker backend cannot collect files (nothing but the program's own output leaves a "
                   "container); use the bwrap backend")

# Positional arguments: the number of files, then per file its name, its number of chunks and the chunks (each
# base64 of a slice of whole 3-byte groups, so each decodes alone); then the stdin's chunks the same way; then the
# program's arguments. Nothing of the request is ever part of the script's text.
_UNPACK = """cd "$WORK" || exit 219
unpack() { n=$1; shift; : > "$target" || exit 219
  while [ "$n" -gt 0 ]; do printf %s "$1" | base64 -d >> "$target" || exit 219; shift; n=$((n-1)); done; rest=$#; }
files=$1; shift
while [ "$files" -gt 0 ]; do
  target=./$1; shift; mkdir -p -- "$(dirname -- "$target")" || exit 219
  unpack "$@"; shift $(($# - rest)); files=$((files-1))
done
target=$STDIN_FILE; unpack "$@"; shift $(($# - rest))
"""


def docker_unavailable_reason() -> str:
    """Empty when an engine answers; otherwise why not (so tests and the factory can say so)."""
    try:
        import docker

        client = docker.from_env(timeout=3)
        client.ping()
        client.close()
        return ""
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


@dataclass
class DockerConfig:
    caps: Limits = field(default_factory=default_caps)
    defaults: Limits | None = None  # None: Limits() within the caps
    max_concurrent: int = 4  # 0 means 2 x CPU cores, as for bwrap (the settings' default)

    def __post_init__(self) -> None:
        self.defaults = self.defaults or clamp(Limits(), self.caps)
        if self.max_concurrent <= 0:  # a semaphore of 0 would hold every run forever
            self.max_concurrent = 2 * (os.cpu_count() or 1)


class DockerBackend(Backend):
    name = "docker"

    def __init__(self, config: DockerConfig | None = None) -> None:
        import docker

        self.config = config or DockerConfig()
        self.client = docker.from_env()
        self._slots = asyncio.Semaphore(self.config.max_concurrent)

    def languages(self) -> dict[str, bool]:
        return {name: True for name in IMAGES}

    async def run(self, request: RunRequest) -> RunResult:
        if request.language not in IMAGES:
            return RunResult(RunStatus.SANDBOX_ERROR, reason=f"{request.language} has no image in the docker backend")
        async with self._slots:
            try:
                return await asyncio.to_thread(self._run_blocking, request, clamp(request.limits, self.config.caps))
            except Exception as exc:
                return RunResult(RunStatus.SANDBOX_ERROR, reason=f"docker: {type(exc).__name__}: {exc}")

    async def close(self) -> None:
        self.client.close()

    def _run_blocking(self, request: RunRequest, limits: Limits) -> RunResult:
        from docker.types import LogConfig

        if request.collect:
            return RunResult(RunStatus.SANDBOX_ERROR, reason=COLLECT_REFUSED)
        image, _, _ = IMAGES[request.language]
        command = container_command(request, limits)
        refused = command_refusal(command)
        if refused:
            return RunResult(RunStatus.SANDBOX_ERROR, reason=refused)
        # the engine's copy of the output: a bounded json-file log (a line costs its escaped bytes plus ~60)
        log_mb = max(1, (16 * limits.output_bytes) >> 20)
        container = self.client.containers.create(
            image, command, network_disabled=True, read_only=True, working_dir="/work",
            tmpfs={"/work": f"size={limits.disk_mb}m,exec", "/tmp": "size=64m"},
            mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m", pids_limit=limits.processes,
            cap_drop=["ALL"], security_opt=["no-new-privileges"], user="65534:65534",
            log_config=LogConfig(type=LogConfig.types.JSON, config={"max-size": f"{log_mb}m", "max-file": "1"}),
        )
        t0 = time.perf_counter()
        timed_out = False
        try:
            container.start()
            try:
                state = container.wait(timeout=limits.wall_s)
            except Exception:
                timed_out = True
                container.kill()
                state = container.wait(timeout=30)
            wall_ms = (time.perf_counter() - t0) * 1000
            out, out_over = read_capped(container.logs(stdout=True, stderr=False, stream=True), limits.output_bytes)
            err, err_over = read_capped(container.logs(stdout=False, stderr=True, stream=True), limits.output_bytes)
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
        finally:
            container.remove(force=True)
        code = int(state.get("StatusCode", -1))
        truncated = out_over or err_over
        stdout = out.decode("utf-8", "replace")
        stderr = err.decode("utf-8", "replace")
        if code == UNPACK_FAILED and not timed_out:
            return RunResult(RunStatus.SANDBOX_ERROR, wall_ms=wall_ms, stderr=stderr,
                             reason="the container could not write the run's files")
        if code == COMPILE_TIMED_OUT and not timed_out:
            return RunResult(RunStatus.COMPILE_ERROR, wall_ms=wall_ms,
                             reason=f"compilation exceeded its time limit of {limits.compile_s:g}s")
        if code == COMPILE_FAILED and not timed_out:
            return RunResult(RunStatus.COMPILE_ERROR, exit_code=1, compile_output=stderr, wall_ms=wall_ms,
                             reason="compilation failed")
        sig = code - 128 if code > 128 else None
        observed = Observed(exit_code=None if sig else code, signal=sig, cpu_ms=0.0, max_rss_kb=0, stderr=stderr,
                            stdout_tail=stdout[-2000:], timed_out=timed_out, output_exceeded=truncated)
        status, reason = classify(observed, limits)
        if oom and status is RunStatus.RUNTIME_ERROR:
            status, reason = RunStatus.MEMORY_EXCEEDED, f"memory limit of {limits.memory_mb} MiB reached (OOM kill)"
        return RunResult(status, exit_code=observed.exit_code, signal=sig, stdout=stdout, stderr=stderr,
                         wall_ms=wall_ms, truncated=truncated, reason=reason)


def _chunks(data: bytes) -> list[str]:
    return [base64.b64encode(data[i:i + CHUNK_BYTES]).decode() for i in range(0, len(data), CHUNK_BYTES)]


def command_refusal(command: list[str]) -> str:
    """Why a container command is too large to start (the kernel would refuse it), or ""."""
    size = sum(len(arg.encode()) + 1 for arg in command)
    if size <= MAX_COMMAND_BYTES:
        return ""
    return (f"the docker backend passes code, files, stdin and arguments on the container's command line: "
            f"{size} bytes of it here, at most {MAX_COMMAND_BYTES}; use the bwrap backend for larger inputs")


def container_command(request: RunRequest, limits: Limits, work: str = "/work",
                      stdin_file: str = STDIN_FILE) -> list[str]:
    """The container's command: ``sh -c`` a fixed script that unpacks the files and the stdin from its positional
    arguments, sets the limits and runs the program with the request's arguments (``"$@"``)."""
    _, source, run = IMAGES[request.language]
    run = run.replace("{compile_s}", f"{limits.compile_s:g}")
    files = {**request.files, source: request.code}
    packed: list[str] = [str(len(files))]
    for name, content in files.items():
        parts = _chunks(content.encode())
        packed += [name, str(len(parts)), *parts]
    stdin = _chunks(request.stdin.encode())
    packed += [str(len(stdin)), *stdin]
    # one limit per ulimit call (dash takes no more), each one a must; -f counts 512-byte blocks in sh
    caps = {"t": int(limits.cpu_s + 0.999), "f": limits.file_size_mb * 2048, "n": limits.open_files}
    script = (f"WORK={shlex.quote(work)}; STDIN_FILE={shlex.quote(stdin_file)}\n{_UNPACK}"
              + "".join(f"ulimit -{flag} {value} || exit 219\n" for flag, value in caps.items())
              + f'{run} "$@" < "$STDIN_FILE"\n'
              # the script's own codes (217-219) mean set-up or compile failures: a program's own 217-219 reads 1,
              # so no program can pass itself off as a sandbox fault (which scores null, not 0)
              'rc=$?; case $rc in 217|218|219) exit 1;; esac; exit $rc\n')
    return ["sh", "-c", script, "sh", *packed, *request.args]


def read_capped(chunks: Iterable[bytes], cap: int) -> tuple[bytes, bool]:
    """The first ``cap`` bytes of a stream of chunks, and whether there was more; stops reading (and closes the
    stream) once past the cap, so a flood of output is never held."""
    kept = bytearray()
    seen = 0
    try:
        for chunk in chunks:
            seen += len(chunk)
            if len(kept) < cap:
                kept += chunk[:cap - len(kept)]
            if seen > cap:
                break
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return bytes(kept), seen > cap
