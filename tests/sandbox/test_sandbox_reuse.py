"""A sandbox serves many runs: nothing one run leaves (files, processes, IPC objects, sockets, memory) reaches the next.

Every test runs hostile programs one after another in ONE sandbox (a backend with a single slot and a single warm
sandbox) and proves the sandbox was reused: the pid namespace and the supervisor's start time are the same in both
runs. A test that found a fresh sandbox would prove nothing, so it fails instead.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal

import pytest

from sandbox.api import Limits, RunRequest, RunResult, RunStatus
from sandbox.bwrap import BwrapBackend, BwrapConfig
from tests.support.sandbox import SUPERVISOR, OneSandbox, same_sandbox, supervisor

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

HEAD, TAIL = "leak-" + os.urandom(6).hex(), os.urandom(6).hex()  # the secret is HEAD + TAIL; no run 2 ever builds it
SECRET = HEAD + TAIL


SCAN = (  # an inline Python program's whole readable address space, through ctypes (its /proc/self/mem is root's)
    "import ctypes\n"
    "def scan(head, tail):\n"
    "    found = 0\n"
    "    with open('/proc/self/maps') as maps:\n"
    "        lines = maps.read().splitlines()\n"
    "    for line in lines:\n"
    "        fields = line.split()\n"
    "        if not fields[1].startswith('r') or fields[-1] in ('[vvar]', '[vvar_vclock]', '[vsyscall]'):\n"
    "            continue\n"
    "        start, end = (int(x, 16) for x in fields[0].split('-'))\n"
    "        data = ctypes.string_at(start, end - start)\n"
    "        at = data.find(head)\n"
    "        while at >= 0:\n"
    "            found += data[at + len(head):at + len(head) + len(tail)] == tail\n"
    "            at = data.find(head, at + 1)\n"
    "        del data\n"
    "    return found\n"
)


def scan_program(extra: str = "") -> str:
    # the halves are built at run time from their reversals, so even this program's source holds neither whole
    return (SCAN + extra + f"head = {HEAD[::-1]!r}[::-1].encode()\ntail = {TAIL[::-1]!r}[::-1].encode()\n"
            "print('FOUND', scan(head, tail))\n")


def scan_finds_nothing(box: OneSandbox, *earlier: RunResult) -> None:
    """A later inline Python program in the same sandbox as ``earlier`` scans its memory and finds no secret."""
    later = box.run(scan_program())
    assert later.status is RunStatus.OK, later
    same_sandbox(*earlier, later)
    assert "FOUND 0" in later.stdout, later.stdout


def test_no_byte_of_an_earlier_run_is_in_a_later_runs_memory(box: OneSandbox) -> None:
    """The job's code, files and stdin, and the program's stdout, stderr and collected files pass through the
    supervisor, whose memory every later inline Python program inherits: none of it may be left there."""
    leaky = (f"# {SECRET}\nimport sys\nsecret = sys.stdin.read()\nprint(secret)\nprint(secret * 50, file=sys.stderr)\n"
             "open('out.txt', 'w').write(secret * 1000)\nopen('big.txt', 'w').write(open('data.txt').read() * 10)\n")
    first = box.run(leaky, stdin=SECRET, files={"data.txt": SECRET * 100}, collect=["out.txt", "big.txt"])
    assert first.status is RunStatus.OK and SECRET in first.stdout and SECRET in first.files["out.txt"], first
    if box.backend.languages().get("cpp"):
        broken = box.backend.run(RunRequest(code=f'int main() {{ return "{SECRET}" + ; }}', language="cpp"))
        compiled = box.loop.run_until_complete(broken)
        assert compiled.status is RunStatus.COMPILE_ERROR and SECRET in compiled.compile_output, compiled
    later = box.run(scan_program())
    assert later.status is RunStatus.OK, later
    same_sandbox(first, later)
    assert "FOUND 0" in later.stdout, later.stdout
    # the scanner does find a secret that is in memory: its own stdin, once read
    control = box.run(scan_program("import sys\nkept = sys.stdin.buffer.read()\n"), stdin=SECRET)
    same_sandbox(first, control)
    assert "FOUND 0" not in control.stdout, control.stdout


def test_no_file_of_an_earlier_run_is_visible_to_a_later_one(box: OneSandbox) -> None:
    planter = (
        "import os\n"
        "planted = []\n"
        "for place in ['/work', '/tmp', '/dev/shm', '/', '/dev', '/.rw', '/.sandbox', '/etc', '/proc/1/root/tmp',\n"
        "              '/proc/1/cwd', '/proc/self/root/tmp', '/dev/pts', '/work/sub/deeper']:\n"
        "    try:\n"
        "        os.makedirs(place, exist_ok=True)\n"
        "        with open(os.path.join(place, 'planted.py'), 'w') as f:\n"
        "            f.write('raise SystemExit(99)')\n"
        "        planted.append(place)\n"
        "    except OSError:\n"
        "        pass\n"
        "os.mkfifo('/tmp/fifo')\n"
        "os.symlink('/proc/1/root', '/tmp/link')\n"
        "print('PLANTED', planted)\n"
    )
    first = box.run(planter)
    assert first.status is RunStatus.OK and "'/work'" in first.stdout and "'/tmp'" in first.stdout, first
    looker = (
        "import os, sys\n"
        "print('WORK', sorted(os.listdir('/work')), 'TMP', sorted(os.listdir('/tmp')),\n"
        "      'SHM', sorted(os.listdir('/dev/shm')))\n"
        "hits = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root.startswith(('/proc', '/sys', '/usr', '/.sandbox/host')):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    hits += [os.path.join(root, f) for f in files if f in ('planted.py', 'fifo', 'link')]\n"
        "print('HITS', hits)\n"
        "import planted\n"  # a module planted on the import path would run here and exit 99
    )
    later = box.run(looker)
    same_sandbox(first, later)
    assert "WORK ['main.py'] TMP [] SHM []" in later.stdout and "HITS []" in later.stdout, later.stdout
    assert later.status is RunStatus.RUNTIME_ERROR and "No module named 'planted'" in later.stderr, later


def connect_program(port: int, abstract: str) -> str:
    """A program that prints CONNECTED for each of a TCP port on loopback and an abstract unix socket it reaches."""
    return (
        "import socket\n"
        f"for family, address in ((socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_UNIX, '\\0{abstract}')):\n"
        "    s = socket.socket(family)\n"
        "    try:\n"
        "        s.connect(address)\n"
        "        print('CONNECTED', address)\n"
        "    except OSError:\n"
        "        pass\n"
    )


def test_no_process_of_an_earlier_run_is_alive_in_a_later_one(box: OneSandbox) -> None:
    spawner = (
        "import os, signal, socket, time\n"
        "def daemon(body):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            null = os.open('/dev/null', os.O_RDWR)\n"
        "            for fd in (0, 1, 2):\n"
        "                os.dup2(null, fd)\n"
        "            body()\n"
        "        os._exit(0)\n"
        "def stubborn():\n"
        "    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
        "        signal.signal(s, signal.SIG_IGN)\n"
        "    while True:\n"
        "        time.sleep(0.01)\n"
        "def listener():\n"
        "    tcp = socket.socket(); tcp.bind(('127.0.0.1', 5577)); tcp.listen()\n"
        "    unix = socket.socket(socket.AF_UNIX); unix.bind('\\0reward-leak'); unix.listen()\n"
        "    while True:\n"
        "        time.sleep(1)\n"
        "daemon(stubborn)\n"
        "daemon(listener)\n"
        "if os.fork() == 0:\n"
        "    os.kill(os.getpid(), signal.SIGSTOP)\n"
        "time.sleep(0.3)\n"
        "print('PROCS', len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
    )
    first = box.run(spawner)
    procs = int(first.stdout.split("PROCS ")[1])
    assert first.status is RunStatus.OK and procs >= 5, first  # pid 1, the program, 3 of its own (and zombies)
    looker = (
        "import os\n"
        "print('PIDS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) == sorted([1, os.getpid()]))\n"
        + connect_program(5577, "reward-leak")
    )
    later = box.run(looker)
    same_sandbox(first, later)
    assert "PIDS True" in later.stdout and "CONNECTED" not in later.stdout, later.stdout


def test_no_ipc_object_of_an_earlier_run_is_visible_to_a_later_one(box: OneSandbox) -> None:
    ipc = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "IPC_CREAT = 0o1000\n"
        "ids = [libc.shmget(0x5eed, 4096, IPC_CREAT | 0o666), libc.msgget(0x5eed, IPC_CREAT | 0o666),\n"
        "       libc.semget(0x5eed, 1, IPC_CREAT | 0o666)]\n"
        "print('IDS', ids, [len(open(f'/proc/sysvipc/{k}').read().splitlines()) for k in ('shm', 'msg', 'sem')])\n"
    )
    first = box.run(ipc)
    made = first.stdout.split("IDS")[1]
    assert first.status is RunStatus.OK and "-1" not in made and "[2, 2, 2]" in made, first
    later = box.run(ipc.replace("IPC_CREAT | 0o666", "0"))  # look the same keys up without creating them
    same_sandbox(first, later)
    assert "IDS [-1, -1, -1] [1, 1, 1]" in later.stdout, later.stdout


def test_a_run_that_times_out_runs_out_of_memory_or_kills_everything_leaves_a_working_sandbox(box: OneSandbox) -> None:
    hung = box.run("import time\nprint('up', flush=True)\nwhile True: time.sleep(1)\n", limits=Limits(wall_s=0.5))
    assert hung.status is RunStatus.TIMEOUT, hung
    hog = box.run("x = bytearray(512 << 20)\nprint(len(x))\n", limits=Limits(memory_mb=128))
    assert hog.status is RunStatus.MEMORY_EXCEEDED, hog
    killer = box.run("import os, signal, time\nif os.fork() == 0:\n    time.sleep(60)\n"
                     "os.kill(-1, signal.SIGKILL)\nprint('alive')\n")
    assert killer.status is RunStatus.OK and "alive" in killer.stdout, killer
    after = box.run("print(6 * 7)\n")
    assert after.status is RunStatus.OK and after.stdout.endswith("42\n"), after
    same_sandbox(hung, hog, killer, after)
    assert box.backend.stats["reuses"] >= 3, box.backend.stats


def test_a_sandbox_serves_at_most_reuse_runs_runs() -> None:
    loop = asyncio.new_event_loop()
    backend = BwrapBackend(BwrapConfig(warm_pool=1, max_concurrent=1, reuse_runs=2))
    try:
        got = [loop.run_until_complete(backend.run(RunRequest(code=SUPERVISOR))) for _ in range(4)]
        assert [r.status for r in got] == [RunStatus.OK] * 4
        starts = [supervisor(r) for r in got]
        assert starts[0] == starts[1] != starts[2] == starts[3], starts
    finally:
        loop.run_until_complete(backend.close())
        loop.close()


def test_the_reuse_runs_setting_reaches_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """REWARD_SERVICE_SANDBOX_REUSE_RUNS=1 (through the service's settings) gives every run a fresh sandbox."""
    from reward_service.resources.sandbox import backend_config
    from reward_service.settings import load_settings
    from sandbox.factory import build_backend

    monkeypatch.setenv("REWARD_SERVICE_SANDBOX_REUSE_RUNS", "1")
    monkeypatch.setenv("REWARD_SERVICE_SANDBOX_WARM_POOL", "1")
    backend = build_backend(backend_config(load_settings()))
    assert isinstance(backend, BwrapBackend) and backend.config.reuse_runs == 1
    loop = asyncio.new_event_loop()
    try:
        got = [loop.run_until_complete(backend.run(RunRequest(code=SUPERVISOR))) for _ in range(3)]
        assert len({supervisor(r) for r in got}) == 3 and backend.stats["reuses"] == 0, got
    finally:
        loop.run_until_complete(backend.close())
        loop.close()


def test_a_sandbox_killed_while_idle_is_never_handed_a_job(box: OneSandbox) -> None:
    """An idle sandbox killed from outside (an operator, the OOM killer) is replaced, not answered with an error."""
    first = box.run("print('first')\n")
    assert first.status is RunStatus.OK and box.backend._pool.warm.qsize() == 1
    idle = box.backend._pool.warm._queue[0]  # type: ignore[attr-defined]  # asyncio.Queue keeps its items in a deque
    assert idle.supervisor is not None
    signal.pidfd_send_signal(idle.supervisor, signal.SIGKILL)  # its supervisor dies; bwrap exits after it
    for _ in range(1000):  # the loop notices the exit while it runs
        if idle.proc.returncode is not None:
            break
        box.loop.run_until_complete(asyncio.sleep(0.01))
    assert idle.proc.returncode is not None
    later = box.run("print('later')\n")
    assert later.status is RunStatus.OK and "later" in later.stdout, later
    assert supervisor(first) != supervisor(later)


# --- Attacks on the sandbox's own state ------------------------------------------------------------------------------
# Several of these leave something behind that the supervisor answers by having the sandbox destroyed instead of
# reused: those tests prove the hostile run itself ran in a reused sandbox, and then only ask that the next run is
# unaffected (in the same sandbox or a fresh one).

def plant(box: OneSandbox, planter: str, expect: str) -> tuple[RunResult, RunResult]:
    """A control run, then ``planter`` in the same (so reused) sandbox; it must succeed and print ``expect``."""
    control = box.run("print('control')\n")
    first = box.run(planter)
    assert first.status is RunStatus.OK and expect in first.stdout, first
    same_sandbox(control, first)
    return control, first


# Puts every given fd (and the carrying socketpair itself) into an SCM_RIGHTS message that nobody can receive: once
# the program is gone, only the kernel's unix-socket garbage collector can free them, and it runs only when some
# unix socket is released somewhere on the host.
IN_FLIGHT = (
    "import array, os, socket\n"
    "def in_flight(*fds):\n"
    "    a, b = socket.socketpair()\n"
    "    fds = array.array('i', [a.fileno(), b.fileno(), *fds])\n"
    "    a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])\n"
)


def test_a_run_cannot_lower_the_rlimits_later_runs_inherit(box: OneSandbox) -> None:
    probe = "import resource\nprint('STACK', resource.getrlimit(resource.RLIMIT_STACK))\n"
    control = box.run(probe)
    assert control.status is RunStatus.OK, control
    poison = box.run("import resource\n"
                     "for kind, value in ((resource.RLIMIT_STACK, 256 << 10), (resource.RLIMIT_NOFILE, 64)):\n"
                     "    try:\n"
                     "        resource.prlimit(1, kind, (value, value))\n"
                     "        print('lowered')\n"
                     "    except PermissionError:\n"
                     "        print('refused')\n"
                     "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"  # its own limits: allowed
                     "print('own', resource.prlimit(0, resource.RLIMIT_NOFILE))\n")
    assert poison.status is RunStatus.OK and "lowered" not in poison.stdout, poison
    assert poison.stdout.count("refused") == 2 and "own (64, 64)" in poison.stdout, poison
    same_sandbox(control, poison)
    later = box.run(probe)  # today: exit 127, "cannot start program: not allowed to raise maximum limit"
    assert later.status is RunStatus.OK, later
    assert control.stdout.split("STACK")[1] == later.stdout.split("STACK")[1], (control.stdout, later.stdout)


def test_sigint_to_the_supervisor_does_not_turn_a_run_into_a_sandbox_error(box: OneSandbox) -> None:
    """sandbox_error means "the sandbox failed, never the program": the code verifier answers it with "unavailable"
    instead of a score, so a failing program must not be able to reach it by signalling pid 1."""
    result = box.run("import os, signal, time\nos.kill(1, signal.SIGINT)\ntime.sleep(0.2)\nprint('done')\n")
    assert result.status is RunStatus.OK and "done" in result.stdout, result


def test_no_socket_of_an_earlier_run_outlives_it_in_flight(box: OneSandbox) -> None:
    planter = IN_FLIGHT + (
        "tcp = socket.socket(); tcp.bind(('127.0.0.1', 5578)); tcp.listen()\n"
        "unix = socket.socket(socket.AF_UNIX); unix.bind('\\0reward-in-flight'); unix.listen()\n"
        "in_flight(tcp.fileno(), unix.fileno())\n"
        "print('planted')\n"
    )
    control, first = plant(box, planter, "planted")
    looker = "print('UNIX', len(open('/proc/net/unix').read().splitlines()) - 1)\n" + connect_program(
        5578, "reward-in-flight")
    later = box.run(looker)
    assert later.status is RunStatus.OK, later
    assert "CONNECTED" not in later.stdout and "UNIX 0" in later.stdout, later.stdout


def test_memory_pinned_by_an_earlier_run_does_not_fail_a_later_one(box: OneSandbox) -> None:
    pinner = IN_FLIGHT + (
        "fds = []\n"
        "for _ in range(4):\n"  # RLIMIT_FSIZE caps each memfd at 64 MiB
        "    fds.append(os.memfd_create('pin'))\n"
        "    for _ in range(50):\n"
        "        os.write(fds[-1], bytes(1 << 20))\n"
        "in_flight(*fds)\n"
        "print('pinned')\n"
    )
    control, first = plant(box, pinner, "pinned")
    # a run asking for little memory: its cgroup limit (64 + 16 + 64 MiB) is below the 200 MiB still charged
    later = box.run("print('small')\n", limits=Limits(wall_s=10, memory_mb=64, disk_mb=16))
    assert later.status is RunStatus.OK and "small" in later.stdout, later


@pytest.mark.parametrize("owner, signal_name", [("1", "SIGINT"), ("-1", "SIGKILL")])
def test_a_time_bomb_left_by_an_earlier_run_does_not_hit_a_later_one(box: OneSandbox, owner: str,
                                                                     signal_name: str) -> None:
    bomb = IN_FLIGHT + (
        "import fcntl, signal\n"
        "listener = socket.socket(); listener.bind(('127.0.0.1', 0)); listener.listen()\n"
        "sender = socket.create_connection(listener.getsockname()); receiver, _ = listener.accept()\n"
        f"fcntl.fcntl(receiver, fcntl.F_SETOWN, {owner})\n"  # pid 1, or (negative) process group 1
        f"fcntl.fcntl(receiver, 10, signal.{signal_name})\n"  # F_SETSIG: this signal instead of SIGIO
        "fcntl.fcntl(receiver, fcntl.F_SETFL, fcntl.fcntl(receiver, fcntl.F_GETFL) | os.O_ASYNC)\n"
        "sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)\n"
        "sender.send(b'y')\n"  # corked: TCP sends it 200 ms from now, when the receiver signals its owner
        "in_flight(sender.fileno(), receiver.fileno())\n"
        "print('armed')\n"
    )
    control, first = plant(box, bomb, "armed")
    later = box.run("import time\ntime.sleep(1)\nprint('innocent')\n")
    assert later.status is RunStatus.OK and "innocent" in later.stdout, later


def test_a_port_an_earlier_run_used_is_free_for_a_later_one(box: OneSandbox) -> None:
    server = (
        "import socket\n"
        "srv = socket.socket(); srv.bind(('127.0.0.1', 8080)); srv.listen()\n"
        "client = socket.create_connection(('127.0.0.1', 8080)); conn, _ = srv.accept()\n"
        "conn.close(); client.close(); srv.close()\n"  # the server side closes first: its port enters TIME_WAIT
        "print('served')\n"
    )
    control, first = plant(box, server, "served")
    later = box.run(server)  # once: OSError: [Errno 98] Address already in use
    assert later.status is RunStatus.OK and "served" in later.stdout, later
    same_sandbox(control, later)  # the port died with the run's network namespace: no sandbox was spent on it


def test_no_argument_of_an_earlier_run_is_in_a_later_runs_memory(box: OneSandbox) -> None:
    args = [SECRET * 200 + str(i) for i in range(5)]  # a few KiB, each its own object in the job
    request = RunRequest(code=SUPERVISOR + "import sys\nprint(len(sys.argv))\n", args=args)
    first = box.loop.run_until_complete(box.backend.run(request))
    assert first.status is RunStatus.OK, first
    scan_finds_nothing(box, first)


# --- Kernel state outside the run's namespaces (found by a second red-team pass) ------------------------------------
# What a run can leave that is neither a file, a process, a socket nor memory the cgroup counts, in the namespaces
# all runs of a sandbox share: the supervisor's user namespace and the sandbox's network namespace.


def test_a_run_cannot_set_the_project_id_map_later_runs_read(box: OneSandbox) -> None:
    mark = int.from_bytes(os.urandom(3), "big") + 1_000_000  # an id no mapping of the supervisor's would hold
    planter = (
        "import subprocess\n"  # inline Python is not dumpable (its /proc files are root's): a fresh exec is
        f"print(subprocess.run(['/bin/sh', '-c', 'echo \"0 {mark} 1\" > /proc/$$/projid_map && echo WROTE'],\n"
        "                     capture_output=True, text=True))\n"
    )
    control, first = plant(box, planter, "")
    later = box.run("print('PROJID', repr(open('/proc/self/projid_map').read()))\n")
    assert later.status is RunStatus.OK, later
    same_sandbox(control, later)
    assert str(mark) not in later.stdout and "4294967295" in later.stdout, later.stdout  # the supervisor's map


def test_no_ipv6_flow_label_of_an_earlier_run_is_visible_to_a_later_one(box: OneSandbox) -> None:
    mark = os.urandom(8).hex()  # 16 characters: one flow label's destination address
    planter = (
        "import socket, struct\n"
        "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        # struct in6_flowlabel_req: dst, label, action GET, share ANY, flags CREATE, expires, linger (s), pad
        f"req = {mark!r}.encode() + struct.pack('!I', 0x5eed) + struct.pack('=BBHHHI', 0, 255, 1, 150, 150, 0)\n"
        "try:\n"
        "    s.setsockopt(socket.IPPROTO_IPV6, 32, req)\n"  # IPV6_FLOWLABEL_MGR
        "except PermissionError:\n"
        "    print('REFUSED')\n"
        "s.close()\n"
        "print('LABELS', open('/proc/net/ip6_flowlabel').read())\n"
    )
    # the seccomp filter refuses the flow-label manager (a label outlives its socket in the shared namespace)
    control, first = plant(box, planter, "REFUSED")
    assert mark.encode().hex() not in first.stdout, first
    later = box.run("print('LABELS', open('/proc/net/ip6_flowlabel').read())\n")
    assert later.status is RunStatus.OK, later
    same_sandbox(control, later)
    assert mark.encode().hex() not in later.stdout, later.stdout


# --- Third red-team pass: host device nodes, pid 1 as a reaper, output framing ----------------------------------------

DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "pts/ptmx")


def test_a_run_cannot_leave_timestamps_on_the_device_nodes_later_runs_read(box: OneSandbox) -> None:
    """/dev/null and the other nodes are the host's own inodes (every sandbox, and the host, share them), bound onto
    /dev; utime() to "now" needs only write permission. Touching some and not others would leave bits for the next
    run, so _seal_base makes every bind read-only, and the nodes must still work: written, read, a pty opened. (Each
    run has a devpts instance of its own, read-only too: its ptmx is not shared, see the pty test below.)"""
    shared = [d for d in DEVICES if not d.startswith("pts/")]
    probe = ("import os\n"
             f"times = [(os.stat('/dev/' + d).st_atime_ns, os.stat('/dev/' + d).st_mtime_ns) for d in {shared}]\n"
             "print('TIMES', times)\n")
    toucher = (
        "import os\n"
        f"for d in {DEVICES}:\n"
        "    try:\n"
        "        os.utime('/dev/' + d)\n"  # both times to now: allowed to anyone who may write the node
        "        print('TOUCHED', d)\n"
        "    except OSError:\n"
        "        print('REFUSED', d)\n"
        "with open('/dev/null', 'w') as f:\n"
        "    print('WROTE', f.write('x' * 100))\n"
        "print('READ', len(open('/dev/zero', 'rb').read(10)), len(open('/dev/urandom', 'rb').read(10)))\n"
        "main, tty = os.openpty()\n"
        "os.write(tty, b'ping\\n')\n"
        "print('PTY', os.read(main, 100))\n"
    )
    control = box.run(probe)
    assert control.status is RunStatus.OK, control
    first = box.run(toucher)
    assert first.status is RunStatus.OK, first
    later = box.run(probe)
    assert later.status is RunStatus.OK, later
    same_sandbox(control, first, later)
    assert control.stdout.split("TIMES")[1] == later.stdout.split("TIMES")[1], (control.stdout, later.stdout)
    assert "TOUCHED" not in first.stdout, first.stdout
    assert "WROTE 100" in first.stdout and "READ 10 10" in first.stdout, first.stdout
    assert "PTY b'ping" in first.stdout, first.stdout


def test_pid_1_reaps_the_orphans_of_a_running_program(box: OneSandbox) -> None:
    """As the namespace's init the supervisor inherits every orphan; one that has exited stays a zombie, charged to
    RLIMIT_NPROC, until its parent reaps it. A shell script that starts short background jobs (each in a subshell
    that exits at once) must run as it would under any init, not run out of processes."""
    if not box.backend.languages().get("bash"):
        pytest.skip("bash is not available")
    script = ("ok=0\nfor i in $(seq 40); do (true &) && ok=$((ok+1)); done\nsleep 0.2\n"
              "echo OK $ok\necho ZOMBIES $(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l)\n")
    request = RunRequest(code=script, language="bash", limits=Limits(wall_s=5, processes=16))
    result = box.loop.run_until_complete(box.backend.run(request))
    assert result.status is RunStatus.OK and "OK 40" in result.stdout, result


def test_one_byte_writes_do_not_make_the_host_spend_a_frame_per_byte(box: OneSandbox,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's asyncio loop (shared by every request) parses each O/E frame the supervisor sends. A program that
    writes one byte to stdout and stderr and waits until FIONREAD says it was read used to get a frame per byte
    (about 40% of a core of the host's loop for one run). The supervisor now holds a stream's output until its half
    of the buffer is full or FLUSH_S has passed, so the frames of a case are bounded by its wall time, whatever the
    program writes. Counted at the host's frame reader. The program writes a fixed number of bytes, not for a fixed
    time, so a loaded host that reads them slowly makes the run longer, not the test weaker."""
    from sandbox.bwrap import job
    from sandbox.inside import supervisor

    frames: list[bytes] = []
    real = job.read_frame

    async def counting(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        kind, data = await real(reader)
        frames.append(kind)
        return kind, data

    each = 1500  # bytes per stream: a frame per byte breaks the bound below for any run under 15 s
    spammer = (
        "import array, fcntl, os, termios\n"
        "left = array.array('i', [0])\n"
        f"for _ in range({each}):\n"
        "    os.write(1, b'x'); os.write(2, b'x')\n"
        "    for fd in (1, 2):\n"
        "        left[0] = 1\n"
        "        while left[0]:\n"
        "            fcntl.ioctl(fd, termios.FIONREAD, left)\n"
        "print('done', file=__import__('sys').stderr)\n"
    )
    box.run("print('warm')\n")
    monkeypatch.setattr(job, "read_frame", counting)
    result = box.run(spammer)
    assert result.status is RunStatus.OK and result.stderr.endswith("done\n"), result
    assert result.stderr.count("x") == each and result.stdout.count("x") == each, result
    output_frames = sum(kind in (b"O", b"E") for kind in frames)
    # per stream: one frame per FLUSH_S of the run at most, and one at its end
    bound = 2 * (result.wall_ms / 1000.0 / supervisor.FLUSH_S + 2)
    assert bound < 2 * each, (bound, result.wall_ms)  # a frame per byte would break it: the test proves something
    assert 2 <= output_frames <= bound, (output_frames, bound)


def test_a_compiler_cannot_reopen_its_own_output_pipe(box: OneSandbox) -> None:
    """``#include "/dev/fd/1"`` makes the compiler open its stdout, the pipe the supervisor reads, for reading: it
    would block on its own output until the compile budget ran out, holding the sandbox. The pipe's mode is 0, so the
    open is refused and the compile fails at once, as a compile error."""
    if not box.backend.languages().get("c"):
        pytest.skip("no C compiler")
    request = RunRequest(code='#include "/dev/fd/1"\nint main(void) { return 0; }\n', language="c",
                         limits=Limits(wall_s=5, compile_s=20))
    result = box.loop.run_until_complete(box.backend.run(request))
    assert result.status is RunStatus.COMPILE_ERROR and result.reason == "compilation failed", result
    assert "/dev/fd/1" in result.compile_output, result.compile_output


# --- Per-run namespaces: state of the network namespace, the pid namespace, devpts and the supervisor's heap ----------
# Each run has network, pid, mount and IPC namespaces and a devpts instance of its own, made by a run manager forked
# from a supervisor that never reads a job: whatever a run leaves in them dies with it.

TCP_METRICS = (  # the destinations in the network namespace's TCP metrics cache, dumped over generic netlink
    "import socket, struct\n"
    "def tcp_metrics():\n"
    "    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)\n"  # NETLINK_GENERIC: no privilege needed
    "    def ask(kind, flags, cmd, attrs):\n"
    "        body = struct.pack('BBH', cmd, 1, 0) + attrs\n"
    "        s.send(struct.pack('=IHHII', 16 + len(body), kind, flags, 1, 0) + body)\n"
    "        got = []\n"
    "        while True:\n"
    "            data, at = s.recv(1 << 16), 0\n"
    "            while at < len(data):\n"
    "                size, kind_ = struct.unpack_from('=IH', data, at)\n"
    "                if kind_ in (2, 3):\n"  # NLMSG_ERROR, NLMSG_DONE
    "                    return got\n"
    "                got.append(data[at + 20:at + size])\n"
    "                at += (size + 3) & ~3\n"
    "            if not flags & 0x300:\n"
    "                return got\n"
    "    def attrs(blob):\n"
    "        at, found = 0, {}\n"
    "        while at + 4 <= len(blob):\n"
    "            size, kind = struct.unpack_from('=HH', blob, at)\n"
    "            found[kind & 0x3fff] = blob[at + 4:at + size]\n"
    "            at += (size + 3) & ~3\n"
    "        return found\n"
    "    name = b'tcp_metrics\\0'\n"
    "    family = ask(16, 1, 3, struct.pack('=HH', 4 + len(name), 2) + name + bytes(-len(name) % 4))\n"
    "    family_id = struct.unpack('=H', attrs(family[0])[1][:2])[0]\n"
    "    return [socket.inet_ntoa(a[1]) for a in map(attrs, ask(family_id, 1 | 0x300, 1, b'')) if 1 in a]\n"
    "def udp_sent():\n"
    "    lines = [line.split() for line in open('/proc/net/snmp') if line.startswith('Udp:')]\n"
    "    return int(lines[1][lines[0].index('OutDatagrams')])\n"
)


def test_nothing_of_an_earlier_runs_network_namespace_reaches_a_later_one(box: OneSandbox) -> None:
    """A TCP Fast Open request leaves an entry in the TCP metrics cache of the network namespace, keyed by the
    destination, which the program picks in 127/8; any later program dumps the cache over netlink, without
    privilege. The connection is reset at close: no socket and no TIME_WAIT port is left for a check to see. The
    namespace's counters (here: UDP datagrams sent) are bits a run can leave just as well."""
    address = "127." + ".".join(str(1 + b % 254) for b in os.urandom(3))
    planter = TCP_METRICS + (
        f"srv = socket.socket(); srv.bind(({address!r}, 0)); srv.listen()\n"
        "client = socket.socket()\n"
        "client.sendto(b'x', 0x20000000, srv.getsockname())\n"  # MSG_FASTOPEN: the SYN asks the server for a cookie
        "conn, _ = srv.accept(); conn.recv(1)\n"
        "for s in (client, conn):\n"
        "    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))\n"  # close with a reset
        "    s.close()\n"
        "udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "for _ in range(37):\n"
        "    udp.sendto(b'x', ('127.0.0.1', 9))\n"
        "print('METRICS', tcp_metrics(), 'SENT', udp_sent())\n"
    )
    reader = TCP_METRICS + "print('METRICS', tcp_metrics(), 'SENT', udp_sent())\n"
    control = box.run(reader)
    assert control.status is RunStatus.OK and address not in control.stdout, control
    first = box.run(planter)
    assert first.status is RunStatus.OK and address in first.stdout, first  # the reader sees its own run's entry
    later = box.run(reader)
    assert later.status is RunStatus.OK, later
    same_sandbox(control, first, later)
    assert address not in later.stdout, later.stdout
    assert later.stdout.split("SENT")[1] == control.stdout.split("SENT")[1], (control.stdout, later.stdout)


def test_no_name_an_earlier_job_carried_is_in_a_later_runs_memory(box: OneSandbox) -> None:
    """The job names the run's files and what to collect (and, for Java, the class); whoever reads it holds the
    names in its heap, freed or not. A later inline Python program, which is a fork, must find none of them."""
    # a job larger than the next one, so the next one's buffers are not carved from where this one lay
    names = [f"{SECRET}-{i}-{'x' * 150}" for i in range(40)]
    first = box.run("print('named')\n", files={name: "x" for name in names[:30]}, collect=names[30:])
    assert first.status is RunStatus.OK and "named" in first.stdout, first
    if box.backend.languages().get("java"):
        ident = "L" + SECRET.replace("-", "_")
        java = RunRequest(code=f"public class {ident} {{ public static void main(String[] a) {{ }} }}\n",
                          language="java", limits=Limits(wall_s=10, memory_mb=1024))
        ran = box.loop.run_until_complete(box.backend.run(java))
        assert ran.status is RunStatus.OK, ran
    scan_finds_nothing(box, first)


def test_a_program_does_not_find_what_its_own_run_collects_in_its_memory(box: OneSandbox) -> None:
    """The program sees what it needs of its own job (its file, arguments, environment, limits), not the names the
    host will collect after it: they are read only once every process of the run is dead."""
    result = box.run(scan_program(), collect=[f"{SECRET}.out"])
    assert result.status is RunStatus.OK and "FOUND 0" in result.stdout, result


def test_pid_numbers_carry_no_count_from_an_earlier_run(box: OneSandbox) -> None:
    """Pids count the processes started in the pid namespace: a run that forks N times would tell the next one N."""
    probe = "import os\nprint('PID', os.getpid(), open('/proc/loadavg').read().split()[4])\n"
    control = box.run(probe)
    first = box.run("import os\nfor _ in range(57):\n    if os.fork() == 0:\n        os._exit(0)\n    os.wait()\n"
                    "print('forked')\n")
    later = box.run(probe)
    assert control.status is RunStatus.OK and first.status is RunStatus.OK and later.status is RunStatus.OK
    same_sandbox(control, first, later)
    assert control.stdout.split("PID")[1] == later.stdout.split("PID")[1], (control.stdout, later.stdout)


PTMX = "import os\nst = os.stat('/dev/pts/ptmx')\nprint('PTMX', st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)\n"


def test_a_pty_an_earlier_run_used_leaves_no_time_on_ptmx(box: OneSandbox) -> None:
    """Reading and writing a pty's master moves the access and modification times of the ptmx node it came from
    (in 8-second steps), read-only mount or not: with one devpts instance per sandbox, a later run could read off
    whether an earlier one used a pty."""
    planter = (
        "import os, time\n"
        "before = os.stat('/dev/pts/ptmx')\n"
        "time.sleep(max(0.0, (int(before.st_mtime) | 7) + 1.05 - time.time()))\n"  # into the next 8-second step
        "main, tty = os.openpty()\n"
        "os.write(main, b'x\\n'); os.read(tty, 2); os.write(tty, b'y'); os.read(main, 1)\n"
        "print('MOVED', os.stat('/dev/pts/ptmx').st_mtime_ns != before.st_mtime_ns)\n"
    )
    control = box.run(PTMX)
    first = box.run(planter, limits=Limits(wall_s=15))
    assert first.status is RunStatus.OK and "MOVED True" in first.stdout, first
    later = box.run(PTMX)
    assert control.status is RunStatus.OK and later.status is RunStatus.OK, (control, later)
    same_sandbox(control, first, later)
    atime, mtime, ctime = later.stdout.split("PTMX")[1].split()
    assert atime == mtime == ctime, later.stdout  # untouched since it was made


# Already closed before runs had namespaces of their own (kept as attacks on the reuse): keys are kept per uid, which
# every run of a sandbox shares, and the filter refuses the keyring calls; POSIX message queues live in the run's IPC
# namespace; a lock on a shared, read-only file held by a descriptor in flight is released when the collector frees
# the message, or the sandbox is not reused.

def test_no_key_of_an_earlier_run_is_in_the_uids_keyrings(box: OneSandbox) -> None:
    search = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              "print('SEARCH', libc.syscall(250, 10, -4, b'user', b'reward-leak', 0), ctypes.get_errno())\n"
              "print('KEYS', 'reward-leak' in open('/proc/keys').read())\n")
    add = (search + f"r = libc.syscall(248, b'user', b'reward-leak', {SECRET.encode()!r}, {len(SECRET)}, -4)\n"
           "print('ADD', r, ctypes.get_errno())\n")  # add_key to the user keyring, then keyctl(KEYCTL_SEARCH)
    control, first = plant(box, add, "ADD -1 1")  # EPERM
    later = box.run(search)
    assert later.status is RunStatus.OK and "SEARCH -1 1" in later.stdout and "KEYS False" in later.stdout, later
    same_sandbox(control, later)


def test_no_posix_message_queue_of_an_earlier_run_is_visible_to_a_later_one(box: OneSandbox) -> None:
    queue = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             "fd = libc.mq_open(b'/reward-leak', {flags}, 0o600, None)\n"
             "print('MQ', fd, ctypes.get_errno())\n")
    control, first = plant(box, queue.format(flags="os.O_CREAT | os.O_RDWR"), "MQ ")
    assert "MQ -1" not in first.stdout, first
    later = box.run(queue.format(flags="os.O_RDWR"))
    assert later.status is RunStatus.OK and "MQ -1 2" in later.stdout, later  # ENOENT
    same_sandbox(control, later)


def test_no_lock_held_in_flight_by_an_earlier_run_holds_in_a_later_one(box: OneSandbox) -> None:
    planter = IN_FLIGHT + (
        "import fcntl\n"
        "for path in ('/etc/passwd', '/etc/hosts'):\n"
        "    fd = os.open(path, os.O_RDONLY)\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "    in_flight(fd)\n"
        "print('locked')\n"
    )
    control, first = plant(box, planter, "locked")
    later = box.run("import fcntl, os\n"
                    "for path in ('/etc/passwd', '/etc/hosts'):\n"
                    "    fcntl.flock(os.open(path, os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                    "    print('FREE', path)\n")
    assert later.status is RunStatus.OK and later.stdout.count("FREE") == 2, later


def test_a_sandbox_whose_runs_cannot_have_namespaces_of_their_own_serves_one_run() -> None:
    """Where the first run manager cannot make a run's namespaces (here: bwrap, run as root, keeps its binds over
    parts of /proc, so no run may mount a /proc of its own), pid 1 serves one run itself and the sandbox is replaced
    after it: every run still works, none in a sandbox an earlier one used."""
    loop = asyncio.new_event_loop()
    backend = BwrapBackend(BwrapConfig(warm_pool=1, max_concurrent=1))
    try:
        if "CAP_SYS_ADMIN" not in backend._pool.argv_head:
            pytest.skip("bwrap runs unprivileged here: it binds nothing over /proc")
        at = backend._pool.argv_head.index("CAP_SYS_ADMIN")
        del backend._pool.argv_head[at - 1:at + 1]
        request = RunRequest(code=SUPERVISOR + "print('PID', _os.getpid())\n")
        got = [loop.run_until_complete(backend.run(request)) for _ in range(3)]
        assert [r.status for r in got] == [RunStatus.OK] * 3, got
        assert len({supervisor(r) for r in got}) == 3 and backend.stats["reuses"] == 0, got
        assert all("PID 2" not in r.stdout for r in got), got  # served by pid 1 itself, not by a run manager
    finally:
        loop.run_until_complete(backend.close())
        loop.close()
