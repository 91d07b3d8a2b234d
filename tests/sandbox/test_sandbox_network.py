"""Runs without a network (``network: "none"``): unix sockets only, in the sandbox's own network namespace, which
every such run of a sandbox shares; each attack below tries to leave something in it for the next run, or to reach
past the seccomp rule, and the next run of the same sandbox must find nothing. Runs with a loopback get a network
namespace of their own, as before."""
from __future__ import annotations

import shutil

import pytest

from sandbox.api import RunStatus
from tests.support.sandbox import OneSandbox, same_sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

NET_NS = "import os as _o\nprint('NETNS', _o.readlink('/proc/self/ns/net'))\n"


def netns(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("NETNS "))


PROBE_FAMILIES = NET_NS + r"""
import errno, socket
for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_DGRAM),
                     (socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):
    try:
        socket.socket(family, kind).close()
        print(family.name, "opened")
    except OSError as exc:
        print(family.name, errno.errorcode.get(exc.errno, exc.errno))
a, b = socket.socketpair()
a.sendall(b"unix works")
print(b.recv(64).decode())
"""


def test_a_run_without_network_opens_unix_sockets_only(box: OneSandbox) -> None:
    result = box.run(PROBE_FAMILIES, network="none")
    assert result.status is RunStatus.OK, result
    lines = result.stdout.splitlines()
    for family in ("AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"):
        assert f"{family} EAFNOSUPPORT" in lines, result.stdout
    assert "unix works" in lines
    loopback = box.run(PROBE_FAMILIES)  # the default keeps a loopback of the run's own
    assert "AF_INET opened" in loopback.stdout.splitlines() and "AF_INET6 opened" in loopback.stdout.splitlines()
    same_sandbox(result, loopback)
    assert netns(result.stdout) != netns(loopback.stdout)


LEAVE_STATE = NET_NS + r"""
import os, socket, glob
left = []
# an abstract unix name, held by a daemon that outlives the program
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind("\0reward-probe")
server.listen()
if os.fork() == 0:
    os.setsid()
    import time
    time.sleep(60)
    os._exit(0)
# the namespace's settings, each written where the file allows it
for path in glob.glob("/proc/sys/net/**", recursive=True):
    try:
        with open(path, "w") as f:
            f.write("1")
        left.append(path)
    except OSError:
        pass
# sockets of other families, raw syscalls included
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for family in (2, 10, 16, 17, 40):  # INET, INET6, NETLINK, PACKET, VSOCK
    fd = libc.socket(family, 2, 0)
    if fd >= 0:
        left.append(f"socket family {family}")
print("LEFT", left)
"""

FIND_STATE = NET_NS + r"""
import socket
probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
probe.bind("\0reward-probe")  # free again: the name died with the daemon that held it
with open("/proc/net/unix") as f:
    names = [line.split()[-1] for line in f.read().splitlines()[1:] if len(line.split()) > 7]
print("NAMES", [n for n in names if "reward-probe" in n and n != "@reward-probe"])
with open("/proc/net/sockstat") as f:
    print("SOCKSTAT", f.readline().strip())
"""


def test_a_run_without_network_leaves_nothing_in_the_shared_namespace(box: OneSandbox) -> None:
    first = box.run(LEAVE_STATE, network="none")
    assert first.status is RunStatus.OK, first
    assert "LEFT []" in first.stdout, first.stdout
    later = box.run(FIND_STATE, network="none")
    assert later.status is RunStatus.OK, later
    assert "NAMES []" in later.stdout, later.stdout
    # the probe's own socket is the namespace's only one
    assert "SOCKSTAT sockets: used 1" in later.stdout, later.stdout
    same_sandbox(first, later)  # the shared namespace: the next run was in it, and found nothing
    assert netns(first.stdout) == netns(later.stdout)


IN_FLIGHT = NET_NS + r"""
import socket
a, b = socket.socketpair()
socket.send_fds(a, [b"x"], [b.fileno(), a.fileno()])  # each end in the other's queue: only the collector frees them
print("sent")
"""


def test_a_socket_left_in_flight_without_network_never_reaches_the_next_run(box: OneSandbox) -> None:
    """No process owns a socket in flight, so only the kernel's collector frees it: the manager runs it and counts
    the namespace's sockets, and the sandbox serves another run only if none is left."""
    first = box.run(IN_FLIGHT, network="none")
    assert first.status is RunStatus.OK and "sent" in first.stdout, first
    later = box.run(FIND_STATE, network="none")
    assert "SOCKSTAT sockets: used 1" in later.stdout and "NAMES []" in later.stdout, later.stdout


def test_runs_without_network_share_the_sandboxs_namespace(box: OneSandbox) -> None:
    runs = [box.run("print('hi')\n" + NET_NS, network="none") for _ in range(3)]
    same_sandbox(*runs)
    assert len({netns(r.stdout) for r in runs}) == 1
    own = [box.run("print('hi')\n" + NET_NS) for _ in range(2)]
    same_sandbox(*runs, *own)
    assert len({netns(r.stdout) for r in own} | {netns(runs[0].stdout)}) == 3


def test_an_unknown_network_is_refused_by_name(box: OneSandbox) -> None:
    result = box.run("print(1)\n", network="host")
    assert result.status is RunStatus.SANDBOX_ERROR and "network must be one of loopback, none" in result.reason
