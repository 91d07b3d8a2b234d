"""The docker backend: runs only where a Docker engine answers; elsewhere the skip says why."""
from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.api import Limits, RunRequest, RunStatus
from sandbox.docker_backend import (
    DockerConfig,
    command_refusal,
    container_command,
    docker_unavailable_reason,
    read_capped,
)
from sandbox.factory import UnavailableBackend, build_backend

REASON = docker_unavailable_reason()


def test_without_an_engine_the_factory_names_the_problem() -> None:
    if not REASON:
        pytest.skip("a Docker engine is reachable here")
    backend = build_backend(DockerConfig())
    assert isinstance(backend, UnavailableBackend)
    r = asyncio.run(backend.run(RunRequest(code="print(1)")))
    assert r.status is RunStatus.SANDBOX_ERROR and "docker" in r.reason


@pytest.mark.skipif(bool(REASON), reason=f"no Docker engine reachable: {REASON[:120]}")
def test_docker_runs_and_contains() -> None:
    async def go() -> list:
        backend = build_backend(DockerConfig())
        try:
            return await backend.run_many([
                RunRequest(code="print(input() * 2)", stdin="ab"),
                RunRequest(code="import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)"),
                RunRequest(code="import time\ntime.sleep(30)", limits=Limits(wall_s=2)),
            ])
        finally:
            await backend.close()

    ok, net, slow = asyncio.run(go())
    assert ok.status is RunStatus.OK and ok.stdout == "abab\n"
    assert net.status is RunStatus.RUNTIME_ERROR
    assert slow.status is RunStatus.TIMEOUT


# --- what runs without an engine: the container's command under a real shell, the capped log reader --------------

def _run_command(tmp_path: Path, request: RunRequest, limits: Limits) -> subprocess.CompletedProcess[bytes]:
    """The exact command the container would get, run by the host's own ``sh`` with ``work`` in a temporary
    directory: the unpacking, the limits and the program's arguments are the real script's."""
    work = tmp_path / "work"
    work.mkdir()
    command = container_command(request, limits, work=str(work), stdin_file=str(tmp_path / "stdin"))
    assert command_refusal(command) == ""
    program = [sys.executable if arg == "python3" else arg for arg in command]
    program[2] = program[2].replace("python3 main.py", f"{sys.executable} main.py")
    return subprocess.run(program, capture_output=True, timeout=60)


def test_files_stdin_and_arguments_reach_the_program_through_the_command_line(tmp_path: Path) -> None:
    """A 900 KB stdin and a 220 KB file (each over the kernel's 128 KiB limit for one argument, so they travel in
    chunks), nested paths, and arguments full of shell syntax arrive byte for byte; none of them is ever script."""
    stdin = "".join(f"{i} {i * i}\n" for i in range(80_000))[:900_000]
    blob = "é€𝄞\x00\n" * 20_000 + "end"
    args = ["a b", "$HOME", "`id`", "'q'", '"', "--x", "", ";rm -rf /", "\\n"]
    files = {"data/deep/in.txt": blob, "-dash.txt": "dash", "$(id).txt": "subst"}
    code = ("import hashlib, os, sys\n"
            "print(sys.argv[1:])\n"
            "print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())\n"
            "print(hashlib.sha256(open('data/deep/in.txt', 'rb').read()).hexdigest())\n"
            "print(open('-dash.txt').read(), open('$(id).txt').read())\n")
    request = RunRequest(code=code, stdin=stdin, args=args, files=files)
    done = _run_command(tmp_path, request, Limits())
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0] == repr(args)
    assert lines[1] == hashlib.sha256(stdin.encode()).hexdigest()
    assert lines[2] == hashlib.sha256(blob.encode()).hexdigest()
    assert lines[3] == "dash subst"


def test_the_file_size_limit_is_the_requested_one(tmp_path: Path) -> None:
    """One ``ulimit`` per limit (dash refuses several in one call, which left every limit unset before), and
    ``-f`` in sh's 512-byte blocks: file_size_mb=1 allows a 1 MiB file and not a byte more (Python ignores SIGXFSZ,
    so the write fails with EFBIG); open_files and cpu_s hold as given."""
    code = ("import errno, os, resource\n"
            "fd = os.open('big.bin', os.O_WRONLY | os.O_CREAT)\n"
            "print(os.write(fd, b'x' * (1 << 20)))\n"
            "try:\n    os.write(fd, b'x')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], resource.getrlimit(resource.RLIMIT_CPU)[0])\n")
    done = _run_command(tmp_path, RunRequest(code=code), Limits(file_size_mb=1, open_files=77, cpu_s=3))
    assert done.returncode == 0, done
    assert done.stdout.decode().splitlines() == ["1048576", "EFBIG", "77 3"], done


@pytest.mark.parametrize("exit_code", [217, 218, 219])
def test_a_program_cannot_exit_with_the_scripts_own_codes(tmp_path: Path, exit_code: int) -> None:
    """217-219 mean a compile failure, a compile timeout and files that could not be written (a sandbox fault,
    scored null): a program exiting with one of them reads as exit code 1."""
    done = _run_command(tmp_path, RunRequest(code=f"raise SystemExit({exit_code})"), Limits())
    assert done.returncode == 1


def test_inputs_beyond_the_command_line_limit_are_refused_with_the_reason() -> None:
    command = container_command(RunRequest(code="pass", stdin="x" * 1_300_000), Limits())
    assert "command line" in command_refusal(command) and "bwrap" in command_refusal(command)


def test_output_is_read_up_to_the_cap_and_the_stream_is_closed() -> None:
    """A program that prints without end: the reader keeps the cap, says there was more, and stops reading."""
    state = {"read": 0, "closed": False}

    def endless() -> Iterator[bytes]:
        try:
            while True:
                state["read"] += 1
                yield b"y" * 4096
        finally:
            state["closed"] = True

    kept, over = read_capped(endless(), 10_000)
    assert kept == b"y" * 10_000 and over and state["closed"] and state["read"] == 3
    assert read_capped(iter([b"ab", b"cd"]), 4) == (b"abcd", False)
    assert read_capped(iter([b"ab", b"cde"]), 4) == (b"abcd", True)
