"""The supervisor that runs INSIDE each sandbox (started by bubblewrap as pid 1: ``python -S -I launcher.py``).

Stdlib only and standalone: it is executed as a file inside the sandbox, never imported by the host. It starts,
drops to an unprivileged uid, enters a user and mount namespace of its own, announces itself on the result fd and
waits for ONE job on its stdin (one JSON line). That wait is what makes a warm pool possible: namespace set-up and
interpreter start-up happen before the job exists.

When the job arrives it mounts the run's writable storage (one tmpfs of the job's ``disk_mb``, seen at /work, /tmp
and /dev/shm, so the budget is shared by every writable place), then drops every capability and makes itself
non-dumpable, so nothing the program does can reach it through /proc. It writes the job's files, compiles if the
language needs it, runs the program once under rlimits and the host's seccomp filter, reports on the result fd and
exits; the host then destroys the whole sandbox. Python programs run in a forked child of this already-started
interpreter (it never ran anyone's code before), so they skip interpreter start-up entirely.

As pid 1 of the sandbox's pid namespace the supervisor cannot be killed from inside (``kill -9 -1`` spares it), and
it reaps every orphan the program leaves.
"""
import _ctypes
import marshal
import os
import resource
import stat
import sys
import time

TYPE_CHECKING = False  # only mypy reads the block below: typing and collections.abc would cost start-up
if TYPE_CHECKING:
    import signal
    from collections.abc import Mapping, Sequence
    from types import ModuleType
    from typing import Any

    Job = dict[str, Any]  # the host's job (sandbox/bwrap.py builds it), trusted
    # what _json writes: the report and each case's header
    Json = None | bool | int | float | str | Mapping[str, "Json"] | Sequence["Json"]
    _IntData = _ctypes._SimpleCData[int]
    _CharData = _ctypes._SimpleCData[bytes]
    _PointerData = _ctypes._SimpleCData[int | None]
else:
    import _signal as signal  # the C module: ``signal`` adds enum, which costs half an interpreter start-up
    _IntData = _CharData = _PointerData = _ctypes._SimpleCData

WORK = "/work"
STAGING = "/.rw"
RESULT_FD = 3  # replaced from argv: the host passes the pipe's number
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2


class _CInt(_IntData):
    _type_ = "i"


class _CChar(_CharData):
    _type_ = "c"


class _CPointer(_PointerData):
    _type_ = "P"


class _LibcFunction(_ctypes.CFuncPtr):
    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _CInt


class _Libc:
    """The C library through ``_ctypes`` alone, as ``ctypes.CDLL(None, use_errno=True)`` would give it: importing
    ``ctypes`` itself cost a third of this interpreter's start-up, in every sandbox. Arguments are ints, bytes
    (``char *``), None (NULL) or ``_buffer``s (a pointer to their memory)."""

    def __init__(self) -> None:
        # None: the program's own symbols, libc's among them (typeshed leaves None out of dlopen's path)
        self._handle = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> _LibcFunction:
        # typeshed wants a ctypes.CDLL: _ctypes reads only its _handle
        function = _LibcFunction((name, self))  # type: ignore[arg-type]
        setattr(self, name, function)
        return function


def _buffer(data: bytes) -> _ctypes.Array[_CChar]:
    """Writable C memory holding ``data`` (kept alive by the returned object)."""
    fields = {"_type_": _CChar, "_length_": max(1, len(data))}
    kind: type[_ctypes.Array[_CChar]] = type("_Buffer", (_ctypes.Array,), fields)
    return kind.from_buffer_copy(data or b"\0")


libc = _Libc()


class SetupError(Exception):
    """The sandbox could not prepare the run: reported as phase "setup", which the host names sandbox_error."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = _ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def _enter_namespaces(uid: int | None, gid: int | None) -> None:
    """Become ``uid`` (root host only), then own a fresh user + mount namespace, where the run's storage is mounted."""
    if uid is not None:
        assert gid is not None  # the host passes both or neither
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    uid, gid = os.getuid(), os.getgid()
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # setuid cleared it; writing /proc/self/*_map needs it
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
    # Credential changes (the uid, the new namespace's capabilities) cleared the parent-death signal bwrap set; set it
    # again. It only takes effect where bwrap may signal us (same uid); when we run under a uid of our own, bwrap holds
    # no CAP_KILL and the host kills us itself, through a pidfd (sandbox/bwrap.py).
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # from here on, no process of the program can open our /proc files
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")


def _mount_storage(disk_bytes: int, inodes: int) -> None:
    """One tmpfs of the job's size behind /work, /tmp and /dev/shm: every writable place shares ``disk_mb``."""
    flags = MS_NOSUID | MS_NODEV
    opts = f"size={disk_bytes},nr_inodes={inodes},mode=0755".encode()
    _check(libc.mount(b"tmpfs", STAGING.encode(), b"tmpfs", flags, opts), "mount the run's tmpfs")
    places = [(WORK, 0o755), ("/tmp", 0o1777)]
    if os.path.isdir("/dev/shm"):
        places.append(("/dev/shm", 0o1777))
    for target, mode in places:
        src = os.path.join(STAGING, target.strip("/").replace("/", "_"))
        os.mkdir(src)
        os.chmod(src, mode)
        _check(libc.mount(src.encode(), target.encode(), None, MS_BIND, None), f"bind {target}")
        _check(libc.mount(b"none", target.encode(), None, MS_REMOUNT | MS_BIND | flags, None), f"remount {target}")
    _check(libc.umount2(STAGING.encode(), MNT_DETACH), "detach the staging mount")
    os.chdir(WORK)


def _drop_capabilities() -> None:
    """Empty every capability set (bounding and ambient too), so no exec can gain one back."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    # struct __user_cap_header_struct {u32 version; int pid} (_LINUX_CAPABILITY_VERSION_3, this process), then
    # two struct __user_cap_data_struct {u32 effective, permitted, inheritable}, all empty
    header = _buffer((0x20080522).to_bytes(4, sys.byteorder) + (0).to_bytes(4, sys.byteorder))
    _check(libc.capset(header, _buffer(bytes(2 * 12))), "capset")


def _install_seccomp(program: bytes) -> None:
    """In the child, just before the program: the host-built filter (sandbox/seccomp.py)."""
    if not program:
        return
    filters = _buffer(program)
    pointer = _ctypes.sizeof(_CPointer)  # struct sock_fprog {unsigned short len; (padding) struct sock_filter *filter}
    fprog = _buffer((len(program) // 8).to_bytes(2, sys.byteorder) + bytes(pointer - 2)
                    + _ctypes.addressof(filters).to_bytes(pointer, sys.byteorder))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0) != 0:
        raise OSError(_ctypes.get_errno(), "cannot install the seccomp filter")


def _read_line(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    return b"".join(chunks)


def _set_limits(lim: "dict[str, Any]") -> None:
    def cap(kind: int, value: int) -> None:
        resource.setrlimit(kind, (value, value))

    cpu = max(1, int(lim["cpu_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, SIGKILL a second later
    if lim.get("memory_rlimit") == "as":
        cap(resource.RLIMIT_AS, lim["memory_mb"] << 20)
    elif lim.get("memory_rlimit") == "data":
        cap(resource.RLIMIT_DATA, lim["memory_mb"] << 20)
    cap(resource.RLIMIT_NPROC, lim["processes"])
    cap(resource.RLIMIT_FSIZE, lim["file_size_mb"] << 20)
    cap(resource.RLIMIT_NOFILE, lim["open_files"])
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_MEMLOCK, 0)


def _confine_child(job: "Job", limits: "dict[str, Any]") -> None:
    """Everything a child gets before its first instruction of tool or program code."""
    _set_limits(limits)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _install_seccomp(bytes.fromhex(job.get("seccomp", "")))


def _write_files(files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = os.path.join(WORK, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)


def _status(st: int) -> tuple[int | None, int | None]:
    if os.WIFSIGNALED(st):
        return None, os.WTERMSIG(st)
    return os.WEXITSTATUS(st), None


def _wait(pid: int) -> tuple[int | None, resource.struct_rusage | None]:
    """Wait for ``pid``, reaping every orphan on the way (we are the namespace's init)."""
    while True:
        try:
            got, st, usage = os.wait4(-1, 0)
        except ChildProcessError:
            return None, None
        except InterruptedError:
            continue
        if got == pid:
            return st, usage


def _compile(job: "Job") -> tuple[bool, str, int | None, int | None]:
    """Run the compile step with captured, capped output; returns (ok, output, exit_code, signal)."""
    cap = job["compile_output_bytes"]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.dup2(w, 1)
            os.dup2(w, 2)
            os.closerange(3, 1 << 16)
            devnull = os.open("/dev/null", os.O_RDONLY)
            os.dup2(devnull, 0)
            _confine_child(job, job["compile_limits"])
            os.execve(job["compile"][0], job["compile"], job["env"])
        except BaseException as exc:
            os.write(2, f"cannot start compiler: {exc}\n".encode())
        os._exit(127)
    os.close(w)
    out = bytearray()
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        if len(out) < cap:
            out += chunk[: cap - len(out)]
    os.close(r)
    st, _ = _wait(pid)
    code, sig = _status(st) if st is not None else (None, None)
    return code == 0, out.decode("utf-8", "replace"), code, sig


def _run_python_here(job: "Job") -> None:
    """In the forked child: behave like ``python main.py`` without starting a new interpreter."""
    import _sitebuiltins
    import builtins

    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    path = os.path.join(WORK, job["source_file"])
    sys.argv = [path, *job["args"]]
    sys.path[:] = [WORK, *[p for p in sys.path if p], *job.get("python_path", [])]
    os.environ.clear()
    os.environ.update(job["env"])
    if job.get("code_object"):  # a trusted program the host compiled once (RunRequest.precompiled)
        code = marshal.loads(job["code_object"])
    else:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
    main = type(sys)("__main__")
    main.__file__ = path
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    exec(code, main.__dict__)  # noqa: S102 - the program this sandbox exists to run


def _start_program(job: "Job", stdin_fd: int, outputs: tuple[int, int] | None = None) -> int:
    """Fork the program; ``outputs`` (a batch's case): the pipes its stdout and stderr go to instead of ours."""
    pid = os.fork()
    if pid != 0:
        return pid
    # The child: never returns to the launcher's loop.
    try:
        os.dup2(stdin_fd, 0)
        if outputs is not None:
            os.dup2(outputs[0], 1)
            os.dup2(outputs[1], 2)
        os.closerange(3, 1 << 16)
        os.chdir(WORK)
        _confine_child(job, job["limits"])
        if job.get("inline_python"):
            sys.stdin = open(0, closefd=False)
            return 0
        os.execve(job["run"][0], [*job["run"], *job["args"]], job["env"])
    except BaseException as exc:
        os.write(2, f"sandbox: cannot start program: {exc}\n".encode())
        os._exit(127)
    return 0


def _run_cases(job: "Job", inputs_fd: int) -> "Job | None":
    """Batch mode: the same (compiled) program once per case, each a process of its own with the run's limits, its
    stdin from its slice of ``inputs_fd`` and its stdout/stderr captured here. After each case every process left
    (the program's children, setsid or not) is killed and reaped, so a case never runs beside an earlier one. Each
    case is reported on the result fd as a header line and its raw output; no new case starts once the batch's
    time budget is spent (the host runs the rest in another sandbox). Returns the job in a child that is to run
    inline Python, else None."""
    import select

    limits = job["limits"]
    budget_end = time.monotonic() + job["batch_budget_s"]
    offset = 0
    for index, size in enumerate(job["cases"]):
        if index and time.monotonic() >= budget_end:
            break
        stdin_fd = os.memfd_create("stdin", 0)
        copied = 0
        while copied < size:  # kernel to kernel: the input never passes through this interpreter
            moved = os.sendfile(stdin_fd, inputs_fd, offset + copied, size - copied)
            if moved == 0:
                break
            copied += moved
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        offset += size
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (out_r, err_r):  # no reopening them through /proc (as for a single run's pipes, the host's)
            os.fchmod(fd, 0)
        started = time.monotonic()
        pid = _start_program(job, stdin_fd, (out_w, err_w))
        if pid == 0:
            return job
        for fd in (stdin_fd, out_w, err_w):
            os.close(fd)
        case, out, err = _watch_case(pid, (out_r, err_r), started + limits["wall_s"], limits["output_bytes"], select)
        case.update(i=index, wall_ms=(time.monotonic() - started) * 1000.0, out=len(out), err=len(err))
        os.write(RESULT_FD, _json(case).encode() + b"\n")
        for data in (out, err):
            view = memoryview(data)
            while view:
                view = view[os.write(RESULT_FD, view):]
    return None


def _watch_case(pid: int, pipes: tuple[int, int], deadline: float, cap: int,
                select: "ModuleType") -> "tuple[dict[str, Json], bytes, bytes]":
    """Read one case's stdout and stderr (each capped) until it exits, overruns its wall clock or its output cap;
    then kill everything but us and reap it. Returns (report fields, stdout, stderr)."""
    pidfd = os.pidfd_open(pid)
    data = {fd: bytearray() for fd in pipes}
    reading = list(pipes)
    timed_out = over = exited = False
    while not (exited or over):
        left = deadline - time.monotonic()
        ready = select.select([*reading, pidfd], [], [], max(0.0, left))[0] if left > 0 else []
        if not ready:
            timed_out = True
            break
        for fd in ready:
            if fd == pidfd:
                exited = True
                continue
            over = _take(fd, data[fd], cap, reading) or over
    os.close(pidfd)
    try:
        os.kill(-1, signal.SIGKILL)  # the namespace's every process but its init (us)
    except OSError:
        pass
    st, usage = _wait(pid)
    while reading:  # every writer is dead now: read to the end
        over = _take(reading[0], data[reading[0]], cap, reading) or over
    while True:  # reap the orphans the kill left, so none counts against the next case's process limit
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    for fd in pipes:
        os.close(fd)
    code, sig = _status(st) if st is not None else (None, signal.SIGKILL)
    case: dict[str, Json] = {
        "phase": "case", "exit_code": code, "signal": sig, "timed_out": timed_out, "output_exceeded": over,
        "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000.0 if usage else 0.0,
        "max_rss_kb": usage.ru_maxrss if usage else 0}
    return case, bytes(data[pipes[0]]), bytes(data[pipes[1]])


def _take(fd: int, buf: bytearray, cap: int, reading: list[int]) -> bool:
    """One read from a case's pipe into ``buf`` (at most ``cap`` kept); True when the cap was passed."""
    chunk = os.read(fd, 1 << 16)
    if not chunk:
        reading.remove(fd)
        return False
    room = cap - len(buf)
    buf += chunk[:max(0, room)]
    return len(chunk) > room


def _collect(names: list[str], cap: int) -> dict[str, str]:
    """Read back regular files only, never following a symlink and never blocking (FIFOs, devices)."""
    files: dict[str, str] = {}
    for rel in names:
        try:
            fd = os.open(os.path.join(WORK, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                data = bytearray()
                while len(data) < cap:
                    chunk = os.read(fd, cap - len(data))
                    if not chunk:
                        break
                    data += chunk
                files[rel] = bytes(data).decode("utf-8", "replace")
        except OSError:
            pass
        finally:
            os.close(fd)
    return files


_ESCAPES = {**{i: f"\\u{i:04x}" for i in range(32)}, ord('"'): '\\"', ord("\\"): "\\\\"}


def _json(value: "Json") -> str:
    """JSON for the report's plain values. Written here because importing ``json`` (re, enum, functools) took
    as long as the interpreter's own start-up, in every sandbox, before any job existed."""
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (int, float)):
        return repr(value)  # ints and finite floats (cpu time, clock marks)
    if isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    if isinstance(value, dict):
        return "{" + ",".join(_json(str(k)) + ":" + _json(v) for k, v in value.items()) + "}"
    return "[" + ",".join(_json(v) for v in value) + "]"


def _report(report: "dict[str, Json]") -> None:
    # One line: the host acts on the newline at once instead of waiting for this interpreter to finish exiting.
    os.write(RESULT_FD, _json(report).encode("utf-8", "replace") + b"\n")


def _read_exact(fd: int, size: int) -> bytes:
    """Exactly ``size`` bytes: the job's stdin follows in the same pipe and must stay there for ``_stdin_memfd``."""
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, min(1 << 20, size - len(data)))
        if not chunk:
            raise SetupError("the host closed the job pipe before the whole job arrived")
        data += chunk
    return bytes(data)


def _read_job(fd: int) -> "Job":
    """The host's job: an 8-byte length, then ``marshal`` data (this very interpreter's format, from the trusted
    host; marshal is built in, so reading it costs no imports). The program's stdin follows it raw."""
    size = int.from_bytes(_read_exact(fd, 8), "little")
    job: Job = marshal.loads(_read_exact(fd, size))
    return job


def _stdin_memfd(fd: int, size: int) -> int:
    """Move the program's stdin from the job pipe into a memfd in the kernel (splice): it never passes through this
    interpreter's memory, so no process forked from here later (an inline Python program, and whatever that forks
    before reading its stdin, like the code verifier's judge) holds a stale copy of it."""
    memfd = os.memfd_create("stdin", 0)
    left = size
    try:
        while left > 0:
            moved = os.splice(fd, memfd, left)
            if moved == 0:
                raise SetupError("the host closed the job pipe before the program's stdin arrived")
            left -= moved
    except OSError:  # no splice from this pipe: copy through one buffer, wiped afterwards
        buf = bytearray(min(left, 1 << 16))
        while left > 0:
            n = os.readv(fd, [memoryview(buf)[:min(left, len(buf))]])
            if n == 0:
                raise SetupError("the host closed the job pipe before the program's stdin arrived") from None
            os.write(memfd, memoryview(buf)[:n])
            left -= n
        buf[:] = bytes(len(buf))
    os.lseek(memfd, 0, os.SEEK_SET)
    return memfd


def _setup(job: "Job") -> int:
    """Storage, privileges and the job's files; anything failing here is the sandbox's problem, not the program's."""
    _mount_storage(job["disk_bytes"], job["inodes"])
    _drop_capabilities()
    try:
        _write_files(job["files"])
    except OSError as exc:
        raise SetupError(f"cannot write the run's files: {exc.strerror or exc}") from None
    return _stdin_memfd(0, job["stdin_bytes"])


def main() -> "Job | None":
    global RESULT_FD
    RESULT_FD = int(sys.argv[1])
    uid = int(sys.argv[2]) if sys.argv[2] != "-" else None
    gid = int(sys.argv[3]) if sys.argv[3] != "-" else None
    _enter_namespaces(uid, gid)
    os.write(RESULT_FD, b"R\n")  # ready: the host may now hand us a job
    job = _read_job(0)
    marks = [time.monotonic()]  # CLOCK_MONOTONIC is the host's too: it splits the host's wall time into phases
    try:
        stdin_fd = _setup(job)
    except (SetupError, OSError) as exc:
        _report({"phase": "setup", "error": str(exc)})
        return None
    report: dict[str, Json] = {"phase": "run", "marks": marks}
    marks.append(time.monotonic())
    if job.get("compile"):
        ok, output, code, sig = _compile(job)
        report["compile_output"] = output
        if not ok:
            report.update(phase="compile", exit_code=code, signal=sig)
            _report(report)
            return None
    os.write(RESULT_FD, b"C\n")  # the program starts now: the host starts its wall clock
    if job.get("await_go"):
        _read_line(0)  # the host lowers the memory limit from the compiler's to the program's, then says go
    marks.append(time.monotonic())
    if job.get("cases") is not None:
        if _run_cases(job, stdin_fd) is not None:
            return job  # a case's child, and the program is inline Python
        marks.append(time.monotonic())
        _report(report)
        return None
    pid = _start_program(job, stdin_fd)
    if pid == 0:
        return job  # we are the child and the program is inline Python
    os.close(stdin_fd)
    os.close(0)
    st, usage = _wait(pid)
    if st is None or usage is None:
        _report({"phase": "setup", "error": "the supervisor lost track of the program's process"})
        return None
    marks.append(time.monotonic())
    code, sig = _status(st)
    report.update(
        exit_code=code, signal=sig,
        cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000.0, max_rss_kb=usage.ru_maxrss,
        files=_collect(job["collect"], job["collect_bytes"]),
    )
    _report(report)
    return None


if __name__ == "__main__":
    _child_job = main()
    if _child_job is not None:
        del _child_job["files"]
        _run_python_here(_child_job)
