"""The seccomp filter every sandboxed program (and compiler) runs under, built on the host as classic BPF.

Why a deny list and not an allow list: unit tests run arbitrary toolchains (CPython, gcc, the JVM, V8, Go, rustc),
whose syscall sets are large and change between versions; an allow list breaks them in ways that look like wrong
answers. What is refused here is what a unit test never needs and what widens the kernel's attack surface or the
program's reach: new namespaces, mounts, tracing other processes, keyrings, io_uring, eBPF, perf, kernel modules,
kexec, clock and host settings. Foreign syscall ABIs (i386 ``int 0x80`` on x86_64, x32) are refused too, since a
filter keyed on x86_64 numbers would not see them.

The supervisor inside the sandbox (sandbox/inside/) is stdlib-only and never imports this module: the host builds
the program once and ships its bytes in each job; the supervisor installs them with ``prctl(PR_SET_SECCOMP)`` in
the child just before the program's first instruction.
"""
from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000

# offsets into struct seccomp_data
_NR = 0
_ARCH = 4
_ARG0_LOW = 16  # args[i] is a u64 at 16 + 8 * i; on these little-endian arches its low 32 bits come first
_ARG1_LOW = 24
_ARG2_LOW = 32
SOL_IPV6, IPV6_FLOWLABEL_MGR = 41, 32
# socket(2) families a program may open: AF_UNIX, AF_INET, AF_INET6 (the run's own network namespace, loopback only) and
# AF_NETLINK (libc's getifaddrs). Others are refused: AF_VSOCK is not isolated by a network namespace at all (it
# reaches the hypervisor), and the rest (packet, bluetooth, RDS, crypto sockets...) are kernel surface no test needs.
SOCKET_FAMILIES = (1, 2, 10, 16)
# A run without a network (``RunRequest.network == "none"``) runs in the sandbox's own network namespace, which every
# such run of it shares: unix sockets only, whose names and buffers die with the run's processes (the run manager
# checks that none is left in flight), so no run can leave state of the namespace for the next.
OFFLINE_SOCKET_FAMILIES = (1,)

# clone(2) flags that create namespaces; all live in the low 32 bits of the first argument on both arches below
CLONE_NEW_FLAGS = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
                   | 0x00000080)

REFUSED = (
    # namespaces and mounts
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    # reaching other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    # kernel attack surface a test never needs
    "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf",
    "perf_event_open", "userfaultfd", "fanotify_init", "open_by_handle_at", "name_to_handle_at", "memfd_secret",
    # the host itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff", "reboot",
    "sethostname", "setdomainname", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog",
    "quotactl", "quotactl_fd", "lookup_dcookie", "vhangup", "iopl", "ioperm", "uselib",
)

# Only where the host cannot count memfd pages against the run (no memory cgroup): refused, so memory a program can
# pin is bounded by its rlimits and the capped tmpfs mounts.
MEMFD = ("memfd_create",)

# name: (x86_64, aarch64 with its asm-generic numbering; None where the call does not exist there)
_NUMBERS = {
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "pidfd_getfd": (438, 438), "process_madvise": (440, 440), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427), "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "fanotify_init": (300, 262), "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "memfd_secret": (447, 447), "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "swapon": (167, 224), "swapoff": (168, 225),
    "reboot": (169, 142), "sethostname": (170, 161), "setdomainname": (171, 162), "acct": (163, 89),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "clock_adjtime": (305, 266), "adjtimex": (159, 171),
    "syslog": (103, 116), "quotactl": (179, 60), "quotactl_fd": (443, 443), "lookup_dcookie": (212, 18),
    "vhangup": (153, 58), "iopl": (172, None), "ioperm": (173, None), "uselib": (134, None),
    "memfd_create": (319, 279), "clone": (56, 220), "clone3": (435, 435), "prlimit64": (302, 261),
    "setsockopt": (54, 208), "socket": (41, 198),
}
_X86_64 = {n: pair[0] for n, pair in _NUMBERS.items()}
_AARCH64 = {n: pair[1] for n, pair in _NUMBERS.items() if pair[1] is not None}
ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}


@dataclass(frozen=True)
class Filter:
    arch: str
    program: bytes  # packed struct sock_filter[]
    refused: tuple[str, ...]

    @property
    def length(self) -> int:
        return len(self.program) // 8


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def build(machine: str | None = None, *, refuse_memfd: bool = False,
          socket_families: tuple[int, ...] = SOCKET_FAMILIES) -> Filter | None:
    """The filter for this host's architecture, or None where we have no syscall table (then: no filter, and the
    backend says so in its isolation report)."""
    arch = machine or platform.machine()
    if arch not in ARCHES:
        return None
    audit_arch, table = ARCHES[arch]
    refused = tuple(n for n in (*REFUSED, *(MEMFD if refuse_memfd else ())) if n in table)
    eperm = _ins(_RET_K, RET_ERRNO | errno.EPERM)
    out = [
        _ins(_LD_W_ABS, _ARCH),
        _ins(_JEQ_K, audit_arch, 1, 0),
        _ins(_RET_K, RET_KILL_PROCESS),  # another ABI's numbers: the table below would not mean anything
        _ins(_LD_W_ABS, _NR),
    ]
    if arch == "x86_64":
        out += [_ins(_JGE_K, 0x40000000, 0, 1), eperm]  # the x32 ABI shares the arch value; refuse it outright
    for name in refused:
        out += [_ins(_JEQ_K, table[name], 0, 1), eperm]
    # prlimit64 on another process: a program shares the supervisor's uid, so it could lower the supervisor's limits
    # (which every later run of a reused sandbox inherits). Its own limits (pid 0, as libc's setrlimit passes) only.
    out += [
        _ins(_JEQ_K, table["prlimit64"], 0, 4),
        _ins(_LD_W_ABS, _ARG0_LOW),  # pid_t: the kernel reads the low 32 bits only
        _ins(_JEQ_K, 0, 1, 0),
        eperm,
        _ins(_RET_K, RET_ALLOW),
    ]
    # IPv6 flow labels: state of the network namespace that outlives the socket (up to a minute after); each run's
    # namespace dies with it, and no unit test needs one
    out += [
        _ins(_JEQ_K, table["setsockopt"], 0, 6),
        _ins(_LD_W_ABS, _ARG1_LOW),
        _ins(_JEQ_K, SOL_IPV6, 0, 3),
        _ins(_LD_W_ABS, _ARG2_LOW),
        _ins(_JEQ_K, IPV6_FLOWLABEL_MGR, 0, 1),
        eperm,
        _ins(_RET_K, RET_ALLOW),
    ]
    # socket families: an allow list (see SOCKET_FAMILIES); EAFNOSUPPORT is what a program expects of a family the
    # kernel lacks
    families = len(socket_families)
    out += [_ins(_JEQ_K, table["socket"], 0, families + 3), _ins(_LD_W_ABS, _ARG0_LOW)]
    out += [_ins(_JEQ_K, family, families - k, 0) for k, family in enumerate(socket_families)]
    out += [_ins(_RET_K, RET_ERRNO | errno.EAFNOSUPPORT), _ins(_RET_K, RET_ALLOW)]
    # clone3 passes its flags in memory BPF cannot read: ENOSYS makes libc fall back to clone(2), checked below
    out += [_ins(_JEQ_K, table["clone3"], 0, 1), _ins(_RET_K, RET_ERRNO | errno.ENOSYS)]
    out += [
        _ins(_JEQ_K, table["clone"], 0, 3),
        _ins(_LD_W_ABS, _ARG0_LOW),
        _ins(_JSET_K, CLONE_NEW_FLAGS, 0, 1),
        eperm,
        _ins(_RET_K, RET_ALLOW),
    ]
    return Filter(arch, b"".join(out), refused)
