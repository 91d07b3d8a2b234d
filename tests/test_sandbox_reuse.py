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
from collections.abc import Iterator

import pytest

from sandbox.api import Limits, RunRequest, RunResult, RunStatus
from sandbox.bwrap import BwrapBackend, BwrapConfig

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

HEAD, TAIL = "leak-" + os.urandom(6).hex(), os.urandom(6).hex()  # the secret is HEAD + TAIL; no run 2 ever builds it
SECRET = HEAD + TAIL
# which sandbox a run ran in: its pid namespace and its supervisor's start time (ns inodes are reused once freed,
# start times are in clock ticks; both together tell sandboxes apart)
SUPERVISOR = ("import os as _os\nprint('SUPERVISOR', _os.readlink('/proc/self/ns/pid'),\n"
              "      open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19])\n")


class OneSandbox:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.backend = BwrapBackend(BwrapConfig(warm_pool=1, max_concurrent=1))

    def run(self, code: str, stdin: str = "", files: dict[str, str] | None = None, collect: list[str] | None = None,
            limits: Limits | None = None) -> RunResult:
        request = RunRequest(code=SUPERVISOR + code, stdin=stdin, files=files or {}, collect=collect or [],
                             limits=limits or Limits(wall_s=10))
        return self.loop.run_until_complete(self.backend.run(request))

    def close(self) -> None:
        self.loop.run_until_complete(self.backend.close())
        self.loop.close()


@pytest.fixture()
def box() -> Iterator[OneSandbox]:
    runner = OneSandbox()
    yield runner
    runner.close()


def supervisor(result: RunResult) -> str:
    line = next((x for x in result.stdout.splitlines() if x.startswith("SUPERVISOR ")), "")
    assert line, result
    return line


def same_sandbox(*results: RunResult) -> None:
    assert len({supervisor(r) for r in results}) == 1, "the runs did not share a sandbox: the test proves nothing"


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
        "import os, socket\n"
        "print('PIDS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) == sorted([1, os.getpid()]))\n"
        "for family, address in ((socket.AF_INET, ('127.0.0.1', 5577)), (socket.AF_UNIX, '\\0reward-leak')):\n"
        "    s = socket.socket(family)\n"
        "    try:\n"
        "        s.connect(address)\n"
        "        print('CONNECTED', address)\n"
        "    except OSError:\n"
        "        pass\n"
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
    from reward_service.sandbox_resource import backend_config
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
    assert first.status is RunStatus.OK and box.backend._warm.qsize() == 1
    idle = box.backend._warm._queue[0]  # type: ignore[attr-defined]  # asyncio.Queue keeps its items in a deque
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
