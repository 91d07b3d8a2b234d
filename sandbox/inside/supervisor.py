"""The supervisor that runs INSIDE each sandbox (started by bubblewrap as pid 1: ``python -S -I supervisor.py``).

Stdlib only and standalone: it is executed as a file inside the sandbox, never imported by the host. It starts,
drops to an unprivileged uid, enters a user and mount namespace of its own, makes itself non-dumpable (nothing a
program does can reach it through /proc) and seals its root and /dev read-only. Namespace set-up and interpreter
start-up happen before any job exists, once per many runs.

Then pid 1 hands over to the supervisor proper, pid 1 of a pid namespace that our user namespace owns (so that it
may unshare a pid namespace for each run and return to its own: one fork per run), and waits for it. The
supervisor never reads a job: a program that is a fork of it (inline Python) would find an earlier run's job in its
memory. For each run it forks a *run manager* from its clean memory, pid 1 of a pid namespace of the run's own. The
manager unshares the run's mount and IPC namespaces (a /proc and a devpts instance of its own), then reads the job
from stdin (and, for a job that may use the network, unshares a network namespace with its loopback up): names,
sizes, commands and limits (marshal); the files' contents, arguments, stdin and the names to collect are spliced
into memfds behind it. It mounts one tmpfs of the job's ``disk_mb`` (seen at /work, /tmp and /dev/shm), copies the
files into it kernel to kernel, runs the compile step if the language has one, then the program once per case (a
single run is one case) with no capabilities, rlimits and the host's seccomp filter. Python programs run in a
forked child of the manager (which holds nothing but this run's job), so they skip interpreter start-up. After the
last case the manager kills every process of the run, reads the names to collect, sends the files and its report,
and exits: every namespace of the run dies with it. The supervisor reaps it, checks that nothing is alive and its
own limits are as they were, forks the next manager (which makes its namespaces and waits for the next job) and says
whether the sandbox can serve another run. Where the first manager cannot make its namespaces, pid 1 serves one run
itself, and the sandbox is replaced after it.

Everything on the result fd is a frame: one byte of kind, a 4-byte little-endian length, the data. Kinds, from the
run manager: R ready (the first manager, once its namespaces are made; data: why this sandbox can serve one run
only, if so), c compiler output, C program starting (the host may answer G on stdin, after lowering the memory
limit), O and E a chunk of a case's stdout and stderr, H a case's header (JSON), F a collected file (name length,
name, contents), D the run's report (JSON); then from the supervisor, after the manager exited: Z, the run is over
(data: why the sandbox must not be reused, or nothing). The supervisor writes only once the manager has exited
having sent its report, so frames never interleave; a manager that died otherwise leaves the supervisor silent, and
the sandbox ends.

A session job (``session`` set; sandbox/bwrap/session.py) is one case whose program is a session's persistent
interpreter (sandbox/inside/repl.py): that child keeps the job pipe as its stdin and the result pipe as fd 3 and
answers the host itself until it exits; the manager watches it as any case and sends its header and report after.
Such a sandbox serves that one job; its supervisor's fourth argument names the modules the interpreter imports,
loaded before any job.

As pid 1 of the run's pid namespace the manager cannot be killed from inside (``kill -9 -1`` spares it), it reaps
every orphan the program leaves, and its exit takes every process of the run with it.
"""
import _ctypes
import atexit
import gc
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
    from typing import Any, NoReturn

    Job = dict[str, Any]  # the host's job (sandbox/bwrap/ builds it), trusted
    # what an inline Python program keeps of it: its path, argv, environment, extra sys.path, precompiled code
    Program = tuple[str, list[str], dict[str, str], list[str], bytes]
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
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MS_NOEXEC, MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 8, 1024, 2048, 1 << 21, 1 << 24
_MOUNT_FLAGS = {b"nosuid": MS_NOSUID, b"nodev": MS_NODEV, b"noexec": MS_NOEXEC, b"noatime": MS_NOATIME,
                b"nodiratime": MS_NODIRATIME, b"relatime": MS_RELATIME, b"strictatime": MS_STRICTATIME}
MNT_DETACH = 2
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
FLUSH_S = 0.01  # a case's output waits at most this long in the run manager before it leaves as a frame
CHILD_WAKE = (-1, -1)  # a pipe SIGCHLD writes to (signal.set_wakeup_fd): the run manager wakes to reap an orphan
# How a run manager ends (its exit status), which tells the supervisor what the result fd holds: its report, the
# last frame of the run, and the sandbox may serve another (DONE) or not (DIRTY); no job came (NO_JOB: the host
# closed stdin); the run's namespaces could not be made, and nothing was sent or read (UNSHARED).
DONE, DIRTY, NO_JOB, UNSHARED = 0, 3, 4, 5
# False where runs cannot have namespaces of their own: the sandbox serves one run, in the network namespace bwrap
# made for it alone
PER_RUN_NETWORK = True
OWN_PROCESSES = 1  # processes of ours (the sandbox's uid) alive while a program runs: RLIMIT_NPROC counts them too
# What an inline program's end calls, bound before any program runs (a program may replace os._exit for its own use)
_OS_EXIT, _OS_KILL, _OS_GETPID, _OS_WRITE, _SIGNAL = os._exit, os.kill, os.getpid, os.write, signal.signal
_GC_COLLECT, _ATEXIT_RUN = gc.collect, atexit._run_exitfuncs
HEAD = 5  # a frame's header on the result fd: its kind (one byte), then its length (4 bytes, little-endian)


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


def _enter_namespaces(uid: int | None, gid: int | None) -> str:
    """Become ``uid`` (root host only), then own a fresh user + mount namespace, where the run's storage is mounted.
    Returns why the sandbox must serve one run only, or ""."""
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
    # The project-id map may be written once, by any member of the namespace and without a capability: filled
    # here, no run can leave numbers of its choice in it for the next (it needs our /proc files, so before we
    # become non-dumpable below)
    single = _fill_projid_map()
    # Credential changes (the uid, the new namespace's capabilities) cleared the parent-death signal bwrap set; set it
    # again. It only takes effect where bwrap may signal us (same uid); when we run under a uid of our own, bwrap holds
    # no CAP_KILL and the host kills us itself, through a pidfd (sandbox/bwrap/).
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # from here on, no process of the program can open our /proc files
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    return single


def _fill_projid_map() -> str:
    """Map every project id of the parent user namespace; returns why it cannot, or ""."""
    try:
        with open("/proc/self/projid_map", "w") as f:
            f.write("0 0 4294967295")
    except OSError as exc:
        return f"cannot set the project-id map: {exc.strerror or exc}"
    return ""


def _uncover_proc() -> None:
    """Unmount what bwrap, run as root, binds read-only over parts of /proc (/proc/irq, /proc/bus): our user
    namespace would lock them, and the kernel lets a user namespace mount a proc (each run needs its own) only while
    every proc it can see is fully visible. Root's alone to write anyway. Done before the uid is dropped, with the
    CAP_SYS_ADMIN bwrap leaves the supervisor for this; where it cannot be done, a run's /proc cannot be mounted, and
    the sandbox serves one run only (``_fall_back``)."""
    for point, _ in reversed(_mount_points()):
        if point.startswith(b"/proc/"):
            libc.umount2(point, MNT_DETACH)


def _mount_points() -> "list[tuple[bytes, bytes]]":
    """(mount point, its per-mount options) of every mount this namespace sees, from /proc/self/mountinfo (whose
    fields escape blanks and backslashes as octal)."""
    def unescape(field: bytes) -> bytes:
        head, *rest = field.split(b"\\")
        return head + b"".join(bytes([int(part[:3], 8)]) + part[3:] for part in rest)

    with open("/proc/self/mountinfo", "rb") as f:
        return [(unescape(fields[4]), fields[5]) for fields in (line.split() for line in f)]


def _seal_base() -> str:
    """Make every mount of the sandbox's base namespace but /proc read-only, so that nothing a run can write lies
    outside its own tmpfs: bwrap's root is writable by the sandbox's uid when bwrap itself makes the user namespace,
    and the device nodes bound into /dev (the host's own inodes) and the devpts instance would keep the timestamps a
    run sets (utime to "now" needs only write permission) for the next. Reading and writing a device node on a
    read-only mount still works. Each mount keeps its own flags (a user namespace may not clear those it inherited
    locked). Returns why not, if it cannot: then this sandbox serves one run only."""
    for point, options in _mount_points():
        if point == b"/proc" or point.startswith(b"/proc/") or b"rw" not in options.split(b","):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        for option in options.split(b","):
            flags |= _MOUNT_FLAGS.get(option, 0)
        if point in (b"/", b"/dev"):
            flags |= MS_NODEV
        if libc.mount(None, point, None, flags, None) != 0:
            return f"cannot make {point.decode(errors='replace')} read-only: {os.strerror(_ctypes.get_errno())}"
    return ""


def _run_namespaces(fresh_pid: bool = True) -> None:
    """Mount and IPC namespaces of the run's own, which die with the run manager and with them every file, shared
    memory segment and message queue the run left. ``fresh_pid``: this process is pid 1 of a pid namespace of the
    run's own, which gets its own /proc. The run also gets a devpts instance of its own: a pty's use moves the times
    of the ptmx node it came from. The network namespace waits for the job (``_own_network``)."""
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare the run's namespaces")
    if not fresh_pid:
        return
    _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount the run's /proc")
    _check(libc.mount(b"devpts", b"/dev/pts", b"devpts", MS_RDONLY | MS_NOSUID | MS_NOEXEC,
                      b"newinstance,ptmxmode=0666,mode=620"), "mount the run's devpts")  # read-only, as the base


def _own_network() -> None:
    """A network namespace of the run's own, with its loopback up, for a job that may use the network: everything
    in it dies with the run manager (sockets, ports, the TCP metrics cache, counters...). A job without a network
    stays in the sandbox's namespace, where its seccomp filter allows unix sockets only (sandbox/seccomp.py)."""
    _check(libc.unshare(CLONE_NEWNET), "unshare the run's network namespace")
    _loopback_up()


def _loopback_up() -> None:
    """Bring up the new network namespace's loopback (the kernel gives it 127.0.0.1 and ::1): a program that talks to
    itself over 127.0.0.1 works as anywhere else. SIOCSIFFLAGS on any socket of the namespace; no import needed."""
    fd = libc.socket(2, 2 | os.O_CLOEXEC, 0)  # AF_INET, SOCK_DGRAM
    if fd < 0:
        raise SetupError(f"socket: {os.strerror(_ctypes.get_errno())}")
    try:
        name = b"lo".ljust(16, b"\0")  # struct ifreq: the name, then a union of 24 bytes (the flags first)
        request = _buffer(name + bytes(24))
        _check(libc.ioctl(fd, SIOCGIFFLAGS, request), "read the loopback's flags")
        flags = int.from_bytes(bytes(memoryview(request))[16:18], sys.byteorder) | IFF_UP
        _check(libc.ioctl(fd, SIOCSIFFLAGS, _buffer(name + flags.to_bytes(2, sys.byteorder) + bytes(22))),
               "bring the loopback up")
    finally:
        os.close(fd)


def _mount_storage(disk_bytes: int, inodes: int) -> None:
    """One tmpfs of the job's size behind /work, /tmp and /dev/shm (every writable place shares ``disk_mb``), in the
    run's mount namespace: the next run in this sandbox starts from the sealed base again."""
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


def _rlimits() -> "list[tuple[int, int]]":
    return [resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource)) if name.startswith("RLIMIT_")]


def _in_flight() -> str:
    """What is left of the run's sockets after every process of it is dead, in words, or "". A socket passed in an
    SCM_RIGHTS message that nobody receives belongs to no process, and neither does what it carries: descriptors that
    hold a lock on a base file (flock, OFD locks), which the next run would find taken, or memory. Only the kernel's
    unix-socket collector frees them, and it runs when some unix socket is released, so this releases one first, then
    reads the run's network namespace's count of sockets in /proc/net/sockstat (the manager holds none). Ports,
    listeners and TIME_WAIT die with the namespace."""
    import _socket

    for end in _socket.socketpair():
        end.close()
    deadline = time.monotonic() + 0.2
    while True:
        try:
            with open("/proc/net/sockstat", "rb") as f:
                stat = f.read().split()
        except OSError:
            return ""  # no such file on this host: nothing to check by
        used = stat[stat.index(b"used") + 1] if b"used" in stat else b"0"
        if used == b"0":
            return ""
        if time.monotonic() >= deadline:
            return f"{used.decode()} sockets in flight"
        time.sleep(0.005)


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


def _set_limits(lim: "dict[str, Any]") -> None:
    def cap(kind: int, value: int) -> None:
        resource.setrlimit(kind, (value, value))

    cpu = max(1, int(lim["cpu_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, SIGKILL a second later
    if lim.get("memory_rlimit") == "as":
        cap(resource.RLIMIT_AS, lim["memory_mb"] << 20)
    elif lim.get("memory_rlimit") == "data":
        cap(resource.RLIMIT_DATA, lim["memory_mb"] << 20)
    # the uid's processes: ours count too (pid 1 alone once served every run, and programs had what was left)
    cap(resource.RLIMIT_NPROC, lim["processes"] + OWN_PROCESSES - 1)
    cap(resource.RLIMIT_FSIZE, lim["file_size_mb"] << 20)
    cap(resource.RLIMIT_NOFILE, lim["open_files"])
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_MEMLOCK, 0)


def _confine_child(job: "Job", limits: "dict[str, Any]") -> None:
    """Everything a child gets before its first instruction of tool or program code: a session and process group
    of its own (so nothing armed to signal the run manager's group, such as an O_ASYNC owner, reaches it), no
    capabilities (the manager keeps its own, for the run's mounts), the run's rlimits, default signal dispositions
    and the host's seccomp filter."""
    os.setsid()
    _drop_capabilities()
    _set_limits(limits)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the manager ignores it; an ignored signal survives exec
    signal.set_wakeup_fd(-1)  # the manager's own SIGCHLD wake-up (an inline Python program never execs)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _install_seccomp(bytes.fromhex(job.get("seccomp", "")))


def _write_all(fd: int, data: "bytes | memoryview") -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _send(kind: bytes, data: bytes = b"") -> None:
    """One frame on the result fd: the host reads frames only, so nothing can be mistaken for another kind."""
    _write_all(RESULT_FD, kind + len(data).to_bytes(4, "little") + data)


def _copy(out_fd: int, in_fd: int, offset: int, size: int, buf: bytearray) -> int:
    """``size`` bytes of ``in_fd`` from ``offset`` to ``out_fd``, in the kernel (sendfile) where it can; else through
    ``buf``, which dies with the run manager. Returns the bytes copied (fewer at end of file)."""
    done = 0
    try:
        while done < size:
            moved = os.sendfile(out_fd, in_fd, offset + done, size - done)
            if moved == 0:
                return done
            done += moved
        return done
    except OSError as exc:
        if done or exc.errno not in (22, 38):  # EINVAL, ENOSYS: this pair of files cannot sendfile
            raise
    view = memoryview(buf)
    while done < size:
        n = os.preadv(in_fd, [view[:min(len(view), size - done)]], offset + done)
        if n == 0:
            break
        _write_all(out_fd, view[:n])
        done += n
    return done


def _into_memfd(fd: int, size: int, name: str, buf: bytearray) -> int:
    """Move ``size`` bytes of the job pipe into a memfd in the kernel (splice): the job's files, arguments, stdin and
    the names to collect never pass through this interpreter's memory, so a program forked from it (inline Python,
    and whatever that forks) finds none of them there but what it reads itself."""
    memfd = os.memfd_create(name, os.MFD_CLOEXEC)
    left = size
    try:
        while left > 0:
            moved = os.splice(fd, memfd, left)
            if moved == 0:
                raise SetupError("the host closed the job pipe before the whole job arrived")
            left -= moved
    except OSError:  # no splice from this pipe: copy through the run's buffer
        view = memoryview(buf)
        while left > 0:
            n = os.readv(fd, [view[:min(left, len(view))]])
            if n == 0:
                raise SetupError("the host closed the job pipe before the whole job arrived") from None
            _write_all(memfd, view[:n])
            left -= n
    return memfd


def _write_files(files: "list[tuple[str, int]]", contents: int, buf: bytearray) -> None:
    """The job's files, their bytes copied from the payload memfd in the kernel."""
    offset = 0
    for rel, size in files:
        path = os.path.join(WORK, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            if _copy(fd, contents, offset, size, buf) != size:
                raise SetupError(f"the job's contents of {rel} are short")
        finally:
            os.close(fd)
        offset += size


def _status(st: int) -> tuple[int | None, int | None]:
    if os.WIFSIGNALED(st):
        return None, os.WTERMSIG(st)
    return os.WEXITSTATUS(st), None


def _kill_all() -> bool:
    """Kill and reap every process of our pid namespace but us (its pid 1: ``kill(-1)`` spares the caller): nothing
    a run started outlives it. False if some process could not be killed within a second (the host then destroys
    this sandbox instead of reusing it)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:  # nobody left to signal
            return True
        except OSError:
            return False
        _reap_all()
    return False


def _reap_all() -> None:
    while True:
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


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


def _compile(job: "Job", buf: bytearray) -> tuple[bool, int, int | None, int | None]:
    """Run the compile step, its output captured into ``buf`` after the frame header (capped); returns (ok, output
    length, exit_code, signal)."""
    cap = min(job["compile_output_bytes"], len(buf) - HEAD)
    r, w = os.pipe()
    os.fchmod(r, 0)  # no reopening it through /proc: a compiler told to #include "/dev/fd/1" would read its own output
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
    view = memoryview(buf)
    junk = bytearray(1 << 12)  # past the cap, output is read here and dropped
    size = 0
    while True:
        n = os.readv(r, [view[HEAD + size:HEAD + cap] if size < cap else memoryview(junk)])
        if n == 0:
            break
        if size < cap:
            size += n
    junk[:] = bytes(len(junk))
    os.close(r)
    st, _ = _wait(pid)
    code, sig = _status(st) if st is not None else (None, None)
    return code == 0, size, code, sig


def _run_python_here(program: "Program") -> "NoReturn":
    """In the forked child: behave like ``python main.py`` without starting a new interpreter, and end like it
    (``_finish``) without tearing the interpreter down."""
    import _sitebuiltins
    import builtins

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C is KeyboardInterrupt, as in a fresh python
    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    path, argv, env, python_path, code_object = program
    sys.argv = [path, *argv]
    sys.path[:] = [WORK, *[p for p in sys.path if p], *python_path]
    os.environ.clear()
    os.environ.update(env)
    ours = set(sys.modules)
    main = type(sys)("__main__")
    main.__file__ = path
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    status = 0
    code = None
    try:
        if code_object:  # a trusted program the host compiled once (RunRequest.precompiled)
            code = marshal.loads(code_object)
        else:
            with open(path, "rb") as f:
                code = compile(f.read(), path, "exec")
        exec(code, main.__dict__)  # noqa: S102 - the program this sandbox exists to run
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except BaseException as exc:  # what the interpreter does with an uncaught exception: the hook, then exit 1
        status = _excepthook(exc)
    del main, code  # the program's module dies with its last reference, as when python main.py ends
    _finish(status, ours)


def _exit_status(code: object) -> int:
    """The exit status ``raise SystemExit(code)`` gives: None is 0, an int its low byte (a C long's, else 255), read
    as the interpreter reads it (an int subclass's own methods play no part), and anything else is written to
    stderr and gives 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        value = int.__int__(code)  # the number itself, whatever the subclass defines
        return value & 0xFF if -(1 << 63) <= value < 1 << 63 else 0xFF
    try:
        stderr = sys.stderr
        if stderr is None:
            _OS_WRITE(2, str(code).encode(errors="replace") + b"\n")
        else:
            stderr.write(str(code))
            stderr.write("\n")
    except BaseException:
        pass
    return 1


def _excepthook(exc: BaseException) -> int:
    """``sys.excepthook`` (the program's, if it set one) on an uncaught exception, its traceback starting at the
    program's own frames, as ``python main.py`` prints it; returns the exit status: 1, the status of a SystemExit the
    hook raised, or -SIGINT for a KeyboardInterrupt (the interpreter dies of it)."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    exc = exc.with_traceback(tb)
    try:
        sys.excepthook(type(exc), exc, tb)
    except SystemExit as hooked:
        return _exit_status(hooked.code)
    except BaseException as broken:
        try:
            sys.stderr.write("Error in sys.excepthook:\n")
            sys.__excepthook__(type(broken), broken, broken.__traceback__)
            sys.stderr.write("\nOriginal exception was:\n")
            sys.__excepthook__(type(exc), exc, tb)
        except BaseException:
            pass
    return -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1


def _finish(status: int, ours: "set[str]") -> "NoReturn":
    """End an inline Python program as the interpreter's exit would, as far as anyone can see: wait for its
    non-daemon threads, run its atexit functions, flush stdout and stderr (a failed flush makes the status 120),
    release what the program made in the interpreter's order (``_release_program``), so that finalizers run and
    files left open are flushed; flush stdout and stderr again, and the streams the interpreter started with (which
    a program that replaced ``sys.stdout`` left holding its output);
    then leave without tearing the interpreter down. That teardown would touch every object this process inherited
    from the supervisor, copying each page that holds one: about a third of a short program's CPU. ``ours``: the
    modules loaded before the program, which hold nothing of it. What this calls is bound before the program ran
    (``_OS_EXIT``...), so a program that replaced ``os._exit`` for its own use still ends with its status. A negative
    status is a signal to die of."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    _run_atexit()
    if not _flush_std() and status >= 0:
        status = 120
    try:  # the program may have replaced sys.modules, or left finalizers that raise: neither stops the exit
        _release_program(ours)
    except BaseException:
        pass
    if not _flush_std() and status >= 0:
        status = 120
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None and _is_open(stream):
                stream.flush()
        except BaseException:
            pass
    if status < 0:
        _SIGNAL(-status, signal.SIG_DFL)
        _OS_KILL(_OS_GETPID(), -status)
    _OS_EXIT(status)


def _release_program(ours: "set[str]") -> None:
    """What the interpreter's teardown does to a program's modules (``__main__`` and those it imported): out of
    ``sys.modules`` (a module nothing else holds dies, and what only it held with it), its open files flushed, then
    a collection, whose finalizers run while every global is still bound (an object of ``__main__`` whose ``__del__``
    uses an imported module works, as there); then whatever module is still alive has its globals cleared, newest
    first, and cycles are collected again."""
    import _weakref

    modules: dict[str, Any] = sys.modules
    names = [name for name in list(modules) if name == "__main__" or name not in ours]
    kept: list[Any] = []  # modules, or what a program put in sys.modules; weak where it can be
    module = None
    for name in names:
        module = modules.get(name)
        if module is not None:
            try:
                kept.append(_weakref.ref(module))
            except TypeError:
                kept.append(lambda module=module: module)
            modules[name] = None
    del module
    _flush_files()
    _GC_COLLECT()
    for ref in reversed(kept):
        module = ref()
        if module is not None:
            _clear_module(module)
    _GC_COLLECT()


def _flush_files() -> None:
    """Flush every file the program still has open for writing. The collector finalizes a cycle's objects in an
    order of its own, and a file's raw layer closed before its buffer loses what the buffer held; the interpreter's
    own exit gets such files to disk. Only the io module's own classes are flushed (a subclass's flush is the
    program's code), and only objects made since the supervisor froze its own, which the collector lists."""
    import _io

    kinds = (_io.TextIOWrapper, _io.BufferedWriter, _io.BufferedRandom)
    for obj in gc.get_objects():
        if type(obj) in kinds:
            try:
                if not obj.closed:
                    obj.flush()
            except BaseException:
                pass


def _run_atexit() -> None:
    """The program's atexit functions, as the interpreter runs them at exit, where no Python frame is below them:
    a traceback the unraisable hook prints of one that failed starts at its own frames, never at ours."""
    previous = sys.unraisablehook

    def strip_ours(args: "Any") -> None:
        tb = args.exc_traceback
        while tb is not None and tb.tb_frame.f_code.co_filename == _finish.__code__.co_filename:
            tb = tb.tb_next
        previous(type(args)((args.exc_type, args.exc_value, tb, args.err_msg, args.object)))

    sys.unraisablehook = strip_ours
    try:
        _ATEXIT_RUN()
    finally:
        if sys.unraisablehook is strip_ours:
            sys.unraisablehook = previous


def _flush_std() -> bool:
    """Flush stdout and stderr as the interpreter's exit does: False if either failed; stdout's failure is printed
    as an exception ignored in it (the default unraisable hook's format), stderr's is not."""
    ok = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None or not _is_open(stream):
            continue
        try:
            stream.flush()
        except BaseException as exc:
            ok = False
            if name == "stdout":
                _print_ignored(stream, exc)
    return ok


def _is_open(stream: object) -> bool:
    """Whether the interpreter's exit would flush this stream: not closed (a ``closed`` that cannot be read counts
    as open, as there)."""
    try:
        return not stream.closed  # type: ignore[attr-defined]
    except BaseException:
        return True


def _clear_module(module: "ModuleType") -> None:
    """A module's globals set to None as the interpreter's teardown does: names with one leading underscore first
    (a finalizer may still want the public ones), then the rest; ``__builtins__`` stays."""
    try:
        names = [name for name in module.__dict__ if isinstance(name, str)]
        for first in (True, False):
            for name in names:
                if name != "__builtins__" and (name.startswith("_") and not name.startswith("__")) == first:
                    module.__dict__[name] = None
    except BaseException:
        pass


def _print_ignored(where: object, exc: BaseException) -> None:
    try:
        import traceback

        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        sys.stderr.write(f"Exception ignored in: {where!r}\n"
                         + "".join(traceback.format_exception(type(exc), exc, tb)))
        sys.stderr.flush()
    except BaseException:
        pass


def _start_program(job: "Job", stdin_fd: int, outputs: tuple[int, int], args_fd: int,
                   buf: bytearray) -> "int | Program":
    """Fork the program, its stdout and stderr on ``outputs`` (pipes the manager reads and frames). The child reads
    its arguments from ``args_fd``: they never pass through the manager's memory. Returns the child's pid; in a
    child that is to run inline Python, what it keeps of the job (the rest is freed as the stack unwinds)."""
    pid = os.fork()
    if pid != 0:
        return pid
    # The child: never returns to the manager's loop.
    try:
        raw = os.pread(args_fd, job["args_bytes"], 0) if job["args_count"] else b""
        args = raw.decode("utf-8", "surrogateescape").split("\0") if job["args_count"] else []
        session = bool(job.get("session"))
        if not session:
            os.dup2(stdin_fd, 0)
        os.dup2(outputs[0], 1)
        os.dup2(outputs[1], 2)
        if session:  # a session's program talks to the host itself: the job pipe in, the result pipe out (fd 3)
            os.dup2(RESULT_FD, 3)
        os.closerange(4 if session else 3, 1 << 16)
        os.chdir(WORK)
        _confine_child(job, job["limits"])
        if job.get("inline_python"):
            sys.stdin = open(0, closefd=False)
            buf[:] = bytes(len(buf))  # earlier cases' output
            return (os.path.join(WORK, job["source_file"]), args, job["env"], job.get("python_path", []),
                    job.get("code_object") or b"")
        os.execve(job["run"][0], [*job["run"], *args], job["env"])
    except BaseException as exc:
        os.write(2, f"sandbox: cannot start program: {exc}\n".encode())
    os._exit(127)


def _run_cases(job: "Job", inputs_fd: int, sizes_fd: int, args_fd: int, buf: bytearray) -> "Program | None":
    """The program once per case (a single run is one case), each a process of its own with the run's limits, its
    stdin from its slice of ``inputs_fd`` and its stdout/stderr relayed to the host as frames. After each case every
    process left (the program's children, setsid or not) is killed and reaped, so a case never runs beside an
    earlier one. Each case ends with its header frame ("H"); no new case starts once the batch's time budget is
    spent (the host runs the rest in another turn). A case's stdin size is read from ``sizes_fd`` just before it
    starts, so no case finds those of later ones in its memory. Returns the program in a child that is to run
    inline Python."""
    import select

    limits = job["limits"]
    budget_end = time.monotonic() + job["batch_budget_s"]
    offset = 0
    for index in range(job["case_count"]):
        if index and time.monotonic() >= budget_end:
            break
        size = int.from_bytes(os.pread(sizes_fd, 8, 8 * index), "little")
        stdin_fd = os.memfd_create("stdin", 0)
        _copy(stdin_fd, inputs_fd, offset, size, buf)  # kernel to kernel: the input never passes through here
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        offset += size
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (out_r, err_r):  # no reopening them through /proc
            os.fchmod(fd, 0)
        started = time.monotonic()
        pid = _start_program(job, stdin_fd, (out_w, err_w), args_fd, buf)
        if not isinstance(pid, int):
            return pid
        for fd in (stdin_fd, out_w, err_w):
            os.close(fd)
        case = _watch_case(pid, (out_r, err_r), started + limits["wall_s"], limits["output_bytes"], buf, select)
        case.update(i=index, wall_ms=(time.monotonic() - started) * 1000.0)
        _send(b"H", _json(case).encode())
    return None


def _watch_case(pid: int, pipes: tuple[int, int], deadline: float, cap: int, buf: bytearray,
                select: "ModuleType") -> "dict[str, Json]":
    """Relay one case's stdout and stderr (each capped) until it exits, overruns its wall clock or its output cap;
    then kill everything but us and reap it. Returns the case's header fields. Orphans are reaped as they die (we
    are the namespace's init: a zombie counts against the program's process limit until its parent reaps it)."""
    pidfd = os.pidfd_open(pid)
    half = len(buf) // 2
    view = memoryview(buf)
    outlets = {pipes[0]: _Outlet(b"O", view[:half], cap), pipes[1]: _Outlet(b"E", view[half:], cap)}
    reading = list(pipes)
    timed_out = over = False
    reaped: tuple[int, resource.struct_rusage] | None = None
    while not over:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        due = min((o.since + FLUSH_S for o in outlets.values() if o.pending), default=deadline)
        ready = select.select([*reading, pidfd, CHILD_WAKE[0]], [], [], max(0.0, min(deadline, due) - now))[0]
        if CHILD_WAKE[0] in ready:
            _drain(CHILD_WAKE[0])
            reaped = reaped or _reap_orphans(pid)
        for fd in ready:
            if fd in outlets:
                over = outlets[fd].read(fd, reading) or over
        now = time.monotonic()
        for outlet in outlets.values():
            if outlet.pending and (now >= outlet.since + FLUSH_S or outlet.full):
                outlet.flush()
        if pidfd in ready:
            break
    os.close(pidfd)
    try:
        os.kill(-1, signal.SIGKILL)  # the namespace's every process but its init (us)
    except OSError:
        pass
    st, usage = reaped or _wait(pid)
    while reading:  # every writer is dead now: read to the end
        over = outlets[reading[0]].read(reading[0], reading) or over
    for outlet in outlets.values():
        outlet.flush()
    _kill_all()  # and reap the orphans the kill left, so none counts against the next case's process limit
    for fd in pipes:
        os.close(fd)
    code, sig = _status(st) if st is not None else (None, signal.SIGKILL)
    return {
        "exit_code": code, "signal": sig, "timed_out": timed_out, "output_exceeded": over,
        "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000.0 if usage else 0.0,
        "max_rss_kb": usage.ru_maxrss if usage else 0}


def _reap_orphans(pid: int) -> "tuple[int, resource.struct_rusage] | None":
    """Reap every child that has exited; the program's status and usage if it was among them."""
    found = None
    while True:
        try:
            got, st, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if got == 0:
            return found
        if got == pid:
            found = (st, usage)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


class _Outlet:
    """One stream of a case on its way to the host. Reads go into this stream's half of the run's buffer and leave
    as one frame when it is full, FLUSH_S after its first byte, or at the case's end: a program that writes a byte
    at a time (and waits until it was read) costs the host's event loop a frame per FLUSH_S, not one per byte. At
    most ``cap`` bytes are sent in all; output is never copied anywhere else in this process."""

    __slots__ = ("kind", "view", "cap", "sent", "pending", "since")

    def __init__(self, kind: bytes, view: memoryview, cap: int) -> None:
        self.kind, self.view, self.cap = kind, view, cap
        self.sent = self.pending = 0
        self.since = 0.0

    @property
    def full(self) -> bool:
        return HEAD + self.pending >= len(self.view)

    def read(self, fd: int, reading: list[int]) -> bool:
        """One read; True when the stream passed its cap (what is past it is read and dropped)."""
        room = max(0, self.cap - self.sent - self.pending)
        if self.full:
            self.flush()
        start = HEAD + self.pending
        n = os.readv(fd, [self.view[start:]])
        if n == 0:
            reading.remove(fd)
            return False
        keep = min(n, room)
        if keep and not self.pending:
            self.since = time.monotonic()
        self.pending += keep
        return n > room

    def flush(self) -> None:
        if self.pending:
            self.view[0:1] = self.kind
            self.view[1:HEAD] = self.pending.to_bytes(4, "little")
            _write_all(RESULT_FD, self.view[:HEAD + self.pending])
            self.sent += self.pending
            self.pending = 0


def _collect(names: list[str], cap: int, budget: int, buf: bytearray) -> "dict[str, Json]":
    """Send back regular files only ("F" frames: name length, name, contents), never following a symlink and never
    blocking (FIFOs, devices); the contents go from the file to the host in the kernel. Each file is cut at ``cap``
    and all of them together at ``budget`` (the run's output budget), and an inode is sent once: hard links to one
    file, which cost the run's disk nothing, cannot multiply what leaves the sandbox. Returns what was cut or left
    out, for the report."""
    seen: dict[tuple[int, int], str] = {}
    cut: list[Json] = []
    links: list[Json] = []
    for rel in names:
        try:
            fd = os.open(os.path.join(WORK, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            first = seen.setdefault((st.st_dev, st.st_ino), rel)
            if first != rel:
                links.append([rel, first])
                continue
            name = rel.encode()
            size = min(st.st_size, cap, budget)
            if size < st.st_size:
                cut.append([rel, size, st.st_size])
                if not size:  # the budget is spent: left out, never returned as an empty file
                    continue
            budget -= size
            _write_all(RESULT_FD, b"F" + (2 + len(name) + size).to_bytes(4, "little")
                       + len(name).to_bytes(2, "little") + name)
            done = _copy(RESULT_FD, fd, 0, size, buf)
            if done < size:  # cannot shrink (every process is dead), but the frame must stay whole
                _write_all(RESULT_FD, bytes(size - done))
        except OSError:
            pass
        finally:
            os.close(fd)
    return {"collect_cut": cut, "collect_links": links}


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


def _read_exact(fd: int, size: int) -> bytes | None:
    """Exactly ``size`` bytes of the job pipe (the job's payload follows and must stay there for ``_into_memfd``);
    None if the host closed it first."""
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, min(1 << 20, size - len(data)))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_job(fd: int) -> "Job | None":
    """The host's next job (None when it closed the pipe: this sandbox is done): an 8-byte length, then ``marshal``
    data (this very interpreter's format, from the trusted host; marshal is built in, so reading it costs no
    imports). It names files, sizes and limits only; the files' contents and the stdin follow raw."""
    head = _read_exact(fd, 8)
    body = _read_exact(fd, int.from_bytes(head, "little")) if head is not None else None
    if body is None:
        return None
    job: Job = marshal.loads(body)
    return job


def _serve(job: "Job", buf: bytearray, problem: str) -> "tuple[Program | None, dict[str, Json]]":
    """One run: (the program, in a child that is to run inline Python; the report, in the run manager). ``problem``:
    why the run's namespaces could not be made, if so (the run is then a set-up failure). Raises SetupError only
    when the job pipe broke (this sandbox cannot go on)."""
    marks = [time.monotonic()]  # CLOCK_MONOTONIC is the host's too: it splits the host's wall time into phases
    fds: list[int] = []
    sections = (("files", "payload_bytes"), ("args", "args_bytes"), ("stdin", "stdin_bytes"), ("sizes", "sizes_bytes"),
                ("late", "late_bytes"))
    try:
        for name, key in sections:
            fds.append(_into_memfd(0, job[key], name, buf))
        contents, args_fd, stdin_fd, sizes_fd, late_fd = fds
        if problem:
            return None, {"phase": "setup", "error": problem}
        try:
            if job["own_network"] and PER_RUN_NETWORK:
                _own_network()
            _mount_storage(job["disk_bytes"], job["inodes"])
            _write_files(job["files"], contents, buf)
        except (SetupError, OSError) as exc:
            if isinstance(exc, OSError):
                return None, {"phase": "setup", "error": f"cannot write the run's files: {exc.strerror or exc}"}
            return None, {"phase": "setup", "error": str(exc)}
        report: dict[str, Json] = {"phase": "run", "marks": marks}
        marks.append(time.monotonic())
        if job.get("compile"):
            ok, size, code, sig = _compile(job, buf)
            view = memoryview(buf)
            view[0:1] = b"c"
            view[1:HEAD] = size.to_bytes(4, "little")
            _write_all(RESULT_FD, view[:HEAD + size])
            view[HEAD:HEAD + size] = bytes(size)  # the program is a fork of this process
            if not ok:
                report.update(phase="compile", exit_code=code, signal=sig)
                return None, report
        _send(b"C")  # the program starts now: the host starts its wall clock
        if job.get("await_go") and os.read(0, 1) != b"G":
            # the host lowers the memory limit from the compiler's to the program's, then says go
            raise SetupError("the host closed the job pipe before saying go")
        marks.append(time.monotonic())
        program = _run_cases(job, stdin_fd, sizes_fd, args_fd, buf)
        if program is not None:
            return program, report  # a case's child, and the program is inline Python
        marks.append(time.monotonic())
        # every process of the run is dead: only now is what the host will collect read in
        job.update(marshal.loads(os.pread(late_fd, job["late_bytes"], 0)))
        report.update(_collect(job["collect"], job["collect_bytes"], job["collect_budget"], buf))
        return None, report
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:  # in a program's child, which closed every descriptor it does not need
                pass


def _clean_up() -> str:
    """After a run, in its manager: every process dead, nothing in flight. Returns what is left that the host should
    know of (then the sandbox is not reused), or ""."""
    if not _kill_all():
        return "a process of the run could not be killed"
    return _in_flight()


def _woken(signum: int, frame: object) -> None:
    """SIGCHLD's handler: the wake-up byte is all it is for (a handler of Python's own makes the C handler write
    it)."""


def _one_run(problem: str) -> "tuple[int, Program | None]":
    """Read one job and serve it: (how the run manager ends, see DONE; the program, in a child that is to run inline
    Python). The report is the last frame sent."""
    global CHILD_WAKE
    job = _read_job(0)
    if job is None:
        return NO_JOB, None
    # the run manager is the init of the run's processes: it reaps orphans as they die
    CHILD_WAKE = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(CHILD_WAKE[1], warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, _woken)
    buf = bytearray(HEAD + max(1 << 16, job["compile_output_bytes"]))
    try:
        program, report = _serve(job, buf, problem)
    except (SetupError, OSError) as exc:  # the job pipe broke mid-job: nothing more can come
        _send(b"D", _json({"phase": "setup", "error": str(exc)}).encode())
        return DIRTY, None
    if program is not None:
        return DONE, program
    dirt = _clean_up()
    if dirt:
        report["dirt"] = dirt
    _send(b"D", _json(report).encode())
    return (DIRTY if dirt or problem else DONE), None


def _manage(first: bool, single: str, why_fd: int) -> "Program":
    """The run manager: pid 1 of the run's pid namespace, forked from the supervisor's clean memory. It makes the
    run's other namespaces (the first manager says ready once they work, or exits with UNSHARED and why on
    ``why_fd``), serves one job and exits, taking every process of the run along. Returns only in a child that is
    to run inline Python."""
    try:
        _run_namespaces()
        problem = ""
    except (SetupError, OSError) as exc:
        if first:
            os.write(why_fd, str(exc).encode())
            os._exit(UNSHARED)
        problem = str(exc)  # reported as the run's set-up failure, once its job is read
    if first:
        _send(b"R", single.encode())  # ready: the host may now hand us a job; a reason here means one run only
    code, program = _one_run(problem)
    if program is None:
        os._exit(code)
    return program


def _supervise(single: str, why_fd: int) -> "Program":
    """The supervisor proper, pid 1 of a pid namespace our user namespace owns: it may return to it (setns) after
    unsharing a run's own, so each run costs one fork. It never reads a job. For each run it forks a run manager
    (``_manage``), reaps it, checks that nothing is alive and its own limits are as they were, tells the host
    whether the sandbox can serve another run ("Z") and forks the next manager, which makes its namespaces while
    the host takes the result. Returns only in a child that is to run inline Python."""
    global OWN_PROCESSES
    OWN_PROCESSES = 3  # pid 1, this supervisor and the run manager
    limits = _rlimits()
    try:
        own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        manager, stuck = _fork_manager(own)
    except (SetupError, OSError) as exc:
        os.write(why_fd, str(exc).encode())
        os._exit(UNSHARED)
    if manager == 0:
        return _manage(True, single, why_fd)
    first = True
    while True:
        code = _exit_code(manager)
        if first and code == UNSHARED:
            os._exit(UNSHARED)  # pid 1 serves one run itself (_fall_back)
        if code not in (DONE, DIRTY):
            os._exit(DONE)  # no job came, or the manager died without its report: nothing more can be said
        verdict = ("the run manager did not clean up after the run" if code == DIRTY else "") or stuck
        verdict = verdict or _invariants(limits) or single
        _send(b"Z", verdict.encode())
        if verdict:
            os._exit(DONE)
        first = False
        try:
            manager, stuck = _fork_manager(own)
        except (SetupError, OSError):
            os._exit(DONE)  # nothing can serve the next job: the sandbox ends (the host sees it end)
        if manager == 0:
            return _manage(False, single, why_fd)


def _fork_manager(own_pid_ns: int) -> tuple[int, str]:
    """Fork a run manager as pid 1 of a pid namespace of its own, then return to ours (``own_pid_ns``) for the next
    one: (os.fork's result, why no other manager can follow this one, or "")."""
    _check(libc.unshare(CLONE_NEWPID), "unshare the run's pid namespace")
    pid = os.fork()
    if pid != 0 and libc.setns(own_pid_ns, CLONE_NEWPID) != 0:
        return pid, f"cannot return to the supervisor's pid namespace: {os.strerror(_ctypes.get_errno())}"
    return pid, ""


def _exit_code(pid: int | None) -> int | None:
    """Wait for our child ``pid`` (any child: None) and return its exit status, or None if a signal killed it (or
    no child is left)."""
    while True:
        try:
            _, st = os.waitpid(-1 if pid is None else pid, 0)
        except ChildProcessError:
            return None
        except InterruptedError:
            continue
        return os.WEXITSTATUS(st) if os.WIFEXITED(st) else None


def _fall_back(why: str) -> "Program | None":
    """Where runs cannot have namespaces of their own (the first run manager could not make them): serve one run
    here, in mount and IPC namespaces of its own, and end; the host replaces the sandbox after it."""
    global PER_RUN_NETWORK
    PER_RUN_NETWORK = False
    _send(b"R", why.encode())
    try:
        _run_namespaces(fresh_pid=False)
        problem = ""
    except (SetupError, OSError) as exc:
        problem = str(exc)
    code, program = _one_run(problem)
    if program is None and code in (DONE, DIRTY):
        _send(b"Z", why.encode())
    return program


def main() -> "Program | None":
    """Set the sandbox up, then hand over to the supervisor proper (``_supervise``) in a pid namespace of its own,
    and wait for it: the sandbox ends with it. Returns the program in a child that is to run inline Python."""
    global RESULT_FD
    RESULT_FD = int(sys.argv[1])
    uid = int(sys.argv[2]) if sys.argv[2] != "-" else None
    gid = int(sys.argv[3]) if sys.argv[3] != "-" else None
    _uncover_proc()
    single = _enter_namespaces(uid, gid)
    single = single or _seal_base()
    os.chdir("/")
    # pid 1 receives the signals it handles from its own namespace: Python's SIGINT handler would let a program
    # kill it (a KeyboardInterrupt), so it has none (nor have the supervisor and the run manager, each a pid 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # what every run manager and inline program imports, and the C modules the code verifier's test harness
    # imports in every run (a dlopen each otherwise): loaded once
    import _json  # noqa: F401
    import _sitebuiltins  # noqa: F401
    import _socket  # noqa: F401
    import math  # noqa: F401
    import select  # noqa: F401

    # a session's sandbox (sandbox/bwrap/session.py) names the modules its interpreter imports: loaded here, before
    # any job exists, so a session starts without importing them
    for name in sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else ():
        __import__(name)

    # Every process from here on is a fork: the collector would write to every object it scans, copying the pages
    # that hold them (inline Python programs keep the collector; what is here is never garbage)
    gc.freeze()
    why = os.pipe2(os.O_CLOEXEC)
    hop = os.fork()
    if hop == 0:
        try:
            _check(libc.unshare(CLONE_NEWPID), "unshare the supervisor's pid namespace")
            if os.fork() != 0:
                os._exit(DONE)  # the supervisor is pid 1's child now
        except (SetupError, OSError) as exc:
            os.write(why[1], str(exc).encode())
            os._exit(UNSHARED)
        return _supervise(single, why[1])
    os.close(why[1])
    ends = [_exit_code(None), _exit_code(None)]  # the hop (DONE once it forked the supervisor), then the supervisor
    if UNSHARED in ends:
        reason = os.read(why[0], 1 << 12).decode(errors="replace")
        return _fall_back(f"cannot give each run namespaces of its own: {reason}")
    return None


def _invariants(limits: "list[tuple[int, int]]") -> str:
    """After a run manager exited: nothing alive but us (its exit took every process of its pid namespace along),
    our limits as they were. Returns what is wrong, or ""."""
    if not _kill_all():
        return "a process of the run could not be killed"
    if _rlimits() != limits:
        return "the supervisor's resource limits were changed"
    return ""


if __name__ == "__main__":
    _program = main()
    if _program is not None:
        _run_python_here(_program)
