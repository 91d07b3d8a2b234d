"""A container backend through the docker SDK, for hosts that prefer containers over bubblewrap.

One container per run: no network, read-only root, a size-capped tmpfs work dir, memory and pids limits, all
capabilities dropped, no-new-privileges. The program goes in base64 through the command line (no bind mounts of
host paths), so the backend also works against a remote engine. Slower than bwrap (container start is ~0.5 s).
"""
from __future__ import annotations

import asyncio
import base64
import posixpath
import shlex
import time
from dataclasses import dataclass, field

from sandbox.api import Limits, RunRequest, RunResult, RunStatus, one_run_per_case
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
    max_concurrent: int = 4

    def __post_init__(self) -> None:
        self.defaults = self.defaults or clamp(Limits(), self.caps)


class DockerBackend:
    name = "docker"
    ready = True

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

    async def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        return list(await asyncio.gather(*(self.run(r) for r in requests)))

    async def run_cases(self, request: RunRequest, stdins: list[str]) -> list[RunResult]:
        return await self.run_many(one_run_per_case(request, stdins))

    async def close(self) -> None:
        self.client.close()

    def _run_blocking(self, request: RunRequest, limits: Limits) -> RunResult:
        image, src, cmd = IMAGES[request.language]
        cmd = cmd.replace("{compile_s}", f"{limits.compile_s:g}")
        files = {**request.files, src: request.code, ".stdin": request.stdin}
        writes = []
        for rel, content in files.items():
            blob = base64.b64encode(content.encode()).decode()
            parent = shlex.quote(posixpath.dirname(rel) or ".")
            writes.append(f"mkdir -p {parent} && echo {blob} | base64 -d > {shlex.quote(rel)}")
        script = (" && ".join(["cd /work", *writes])
                  + f"; ulimit -t {int(limits.cpu_s + 0.999)} -f {limits.file_size_mb * 1024} -n {limits.open_files};"
                  + f" {cmd} < .stdin")
        container = self.client.containers.create(
            image, ["sh", "-c", script], network_disabled=True, read_only=True, working_dir="/work",
            tmpfs={"/work": f"size={limits.disk_mb}m,exec", "/tmp": "size=64m"},
            mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m", pids_limit=limits.processes,
            cap_drop=["ALL"], security_opt=["no-new-privileges"], user="65534:65534",
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
            out = container.logs(stdout=True, stderr=False)
            err = container.logs(stdout=False, stderr=True)
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
        finally:
            container.remove(force=True)
        code = int(state.get("StatusCode", -1))
        truncated = len(out) > limits.output_bytes or len(err) > limits.output_bytes
        stdout = out[: limits.output_bytes].decode("utf-8", "replace")
        stderr = err[: limits.output_bytes].decode("utf-8", "replace")
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
