"""The supervisor that runs INSIDE each sandbox (started by bubblewrap as ``python -S -I launcher.py``).

Stdlib only and standalone: it is executed as a file inside the sandbox, never imported by the host. It starts,
drops to an unprivileged uid in a fresh user namespace, announces itself on fd 3 and waits for ONE job on its stdin
(JSON, until EOF). That wait is what makes a warm pool possible: namespace set-up and interpreter start-up happen
before the job exists. It then writes the job's files, compiles if the language needs it, runs the program once,
reports on fd 3 and exits; the host then destroys the whole sandbox. Python programs run in a forked child of this
already-started interpreter (it never ran anyone's code before), so they skip interpreter start-up entirely.
"""
import ctypes
import json
import os
import resource
import signal
import sys

WORK = "/work"
RESULT_FD = 3  # replaced from argv: the host passes the pipe's number
CLONE_NEWUSER = 0x10000000
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38


def _drop_privileges(uid, gid):
    """Become ``uid`` (real, in the host's user namespace) and then enter a user namespace of our own."""
    libc = ctypes.CDLL(None, use_errno=True)
    if uid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # setuid cleared it; /proc/self/*_map needs it
        if libc.unshare(CLONE_NEWUSER) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER) failed")
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _set_limits(lim):
    def cap(kind, value):
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


def _memfd(data, name):
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _write_files(files):
    for rel, content in files.items():
        path = os.path.join(WORK, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)


def _status(st):
    if os.WIFSIGNALED(st):
        return None, os.WTERMSIG(st)
    return os.WEXITSTATUS(st), None


def _compile(job):
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
            _set_limits(job["compile_limits"])
            os.execve(job["compile"][0], job["compile"], job["env"])
        except BaseException as exc:  # noqa: BLE001 - report and die, never return into the launcher
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
    _, st, _ = os.wait4(pid, 0)
    code, sig = _status(st)
    return code == 0, out.decode("utf-8", "replace"), code, sig


def _run_python_here(job):
    """In the forked child: behave like ``python main.py`` without starting a new interpreter."""
    import builtins
    import _sitebuiltins

    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    path = os.path.join(WORK, job["source_file"])
    sys.argv = [path, *job["args"]]
    sys.path[:] = [WORK, *[p for p in sys.path if p], *job.get("python_path", [])]
    os.environ.clear()
    os.environ.update(job["env"])
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")
    main = type(sys)("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _start_program(job, stdin_fd):
    pid = os.fork()
    if pid != 0:
        return pid
    # The child: never returns to the launcher's loop.
    try:
        os.dup2(stdin_fd, 0)
        os.closerange(3, 1 << 16)
        os.chdir(WORK)
        _set_limits(job["limits"])
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        if job.get("inline_python"):
            sys.stdin = open(0, "r", closefd=False)
            return 0
        os.execve(job["run"][0], [*job["run"], *job["args"]], job["env"])
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"sandbox: cannot start program: {exc}\n".encode())
        os._exit(127)
    return 0


def _collect(names, cap):
    files = {}
    for rel in names:
        path = os.path.join(WORK, rel)
        try:
            with open(path, "rb") as f:
                files[rel] = f.read(cap).decode("utf-8", "replace")
        except OSError:
            continue
    return files


def main():
    global RESULT_FD
    RESULT_FD = int(sys.argv[1])
    uid = int(sys.argv[2]) if sys.argv[2] != "-" else None
    gid = int(sys.argv[3]) if sys.argv[3] != "-" else None
    _drop_privileges(uid, gid)
    os.write(RESULT_FD, b"R\n")  # ready: the host may now hand us a job
    job = json.loads(_read_all(0))
    os.chdir(WORK)
    _write_files(job["files"])
    stdin_fd = _memfd(job["stdin"].encode(), "stdin")
    report = {"phase": "run"}
    if job.get("compile"):
        ok, output, code, sig = _compile(job)
        report["compile_output"] = output
        if not ok:
            report.update(phase="compile", exit_code=code, signal=sig)
            os.write(RESULT_FD, json.dumps(report).encode())
            return None
    os.write(RESULT_FD, b"C\n")  # the program starts now: the host starts its wall clock
    pid = _start_program(job, stdin_fd)
    if pid == 0:
        return job  # we are the child and the program is inline Python
    os.close(stdin_fd)
    os.close(0)
    _, st, usage = os.wait4(pid, 0)
    code, sig = _status(st)
    report.update(
        exit_code=code, signal=sig,
        cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000.0, max_rss_kb=usage.ru_maxrss,
        files=_collect(job["collect"], job["collect_bytes"]),
    )
    os.write(RESULT_FD, json.dumps(report).encode())
    return None


if __name__ == "__main__":
    _child_job = main()
    if _child_job is not None:
        del _child_job["files"], _child_job["stdin"]
        _run_python_here(_child_job)
