"""Sessions on the bwrap backend (``Backend.open_session``), each limit tried by a program that sets out to break it:
state lasts across cells and never crosses sessions; a step past its time limit is interrupted and the session goes on,
or, when the program will not stop, ends with a named status; memory, disk, processes and output stay within their
caps; the interpreter's own end, and a program that writes over its answer pipe, are named too."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from sandbox.api import CellResult, Limits, SandboxSession, SessionEnded, SessionSpec
from sandbox.bwrap import BwrapBackend, BwrapConfig
from sandbox.bwrap.session import GRACE_S

SPEC = SessionSpec(limits=Limits(wall_s=600, cpu_s=60, memory_mb=256, processes=16, disk_mb=16,
                                 output_bytes=4096))


class Sessions:
    """One backend and its event loop for the module; each test opens the sessions it needs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.backend = BwrapBackend(BwrapConfig(warm_pool=0, session_warm_pool=2))

    def open(self, spec: SessionSpec = SPEC) -> SandboxSession:
        return self.loop.run_until_complete(self.backend.open_session(spec))

    def run(self, session: SandboxSession, code: str, timeout_s: float = 10.0) -> CellResult:
        return self.loop.run_until_complete(session.exec(code, timeout_s))

    def ended(self, session: SandboxSession, code: str, timeout_s: float = 10.0) -> SessionEnded:
        with pytest.raises(SessionEnded) as info:
            self.run(session, code, timeout_s)
        assert not session.alive
        return info.value

    def close(self, *sessions: SandboxSession) -> None:
        for session in sessions:
            self.loop.run_until_complete(session.close())


@pytest.fixture(scope="module")
def sessions() -> Iterator[Sessions]:
    s = Sessions()
    yield s
    s.loop.run_until_complete(s.backend.close())
    s.loop.close()


def test_state_lasts_across_cells_like_a_notebook(sessions: Sessions) -> None:
    s = sessions.open()
    assert sessions.run(s, "import json\nrows = [1, 2]\ndef more(n):\n    rows.append(n)").status == "ok"
    assert sessions.run(s, "more(3)\njson.dumps(rows)").value == "'[1, 2, 3]'"
    out = sessions.run(s, "print('a'); import sys; print('b', file=sys.stderr); import os; os.system('echo c')")
    assert (out.stdout, out.stderr) == ("a\nc\n", "b\n")
    failed = sessions.run(s, "rows[10]")
    assert failed.status == "error" and failed.exception and failed.exception["type"] == "IndexError"
    assert "<cell-" in failed.exception["traceback"] and "repl.py" not in failed.exception["traceback"]
    assert sessions.run(s, "exit(3)").status == "error"  # SystemExit ends the cell, not the interpreter
    assert sessions.run(s, "def broken(:").exception["type"] == "SyntaxError"  # type: ignore[index]
    assert sessions.run(s, "len(rows)").value == "3"
    sessions.close(s)


def test_sessions_share_nothing_and_each_has_a_sandbox_of_its_own(sessions: Sessions) -> None:
    a, b = sessions.open(), sessions.open()
    sessions.run(a, "import os, subprocess\nx = 1\nopen('/work/a.txt', 'w').write('a')\n"
                    "open('/tmp/a.txt', 'w').write('a')")
    busy = sessions.loop.create_task(a.exec("p = subprocess.Popen(['sleep', '60'])\nimport time\ntime.sleep(3)", 10))
    sessions.loop.run_until_complete(asyncio.sleep(1.0))  # a's sleep is running now
    seen = sessions.run(b, "import os, subprocess\n('x' in globals(), os.listdir('/work'), os.listdir('/tmp'), "
                           "sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), "
                           "'sleep' in subprocess.run(['ps', '-e'], capture_output=True, text=True).stdout)")
    assert seen.value is not None and seen.value.startswith("(False, [], [], [1, 2") and seen.value.endswith("False)")
    assert sessions.loop.run_until_complete(busy).status == "ok"
    assert sessions.run(a, "os.listdir('/work'), p.poll() is not None").value == "(['a.txt'], True)"
    ids = [sessions.run(x, "import os\n(os.getuid(), os.readlink('/proc/self/ns/user'))").value for x in (a, b)]
    assert ids[0] != ids[1]
    sessions.close(a, b)


def test_a_step_past_its_limit_is_interrupted_and_the_session_goes_on(sessions: Sessions) -> None:
    s = sessions.open()
    sessions.run(s, "import subprocess, time\nkept = 'yes'")
    started = time.monotonic()
    out = sessions.run(s, "child = subprocess.Popen(['sleep', '60'])\nwhile True:\n    pass", timeout_s=1.0)
    assert out.status == "timeout" and out.exception and out.exception["type"] == "KeyboardInterrupt"
    assert time.monotonic() - started < 1.0 + GRACE_S
    assert sessions.run(s, "kept, child.poll() is not None").value == "('yes', True)"  # the step's strays died
    sessions.close(s)


def test_a_step_that_will_not_stop_ends_the_session_by_name(sessions: Sessions) -> None:
    s = sessions.open()
    started = time.monotonic()
    why = sessions.ended(s, "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass",
                         timeout_s=1.0)
    assert why.status == "step_hung" and not why.infra
    assert time.monotonic() - started < 1.0 + GRACE_S + 5
    with pytest.raises(SessionEnded):  # every later step says the same
        sessions.run(s, "1")


def test_a_swallowed_interrupt_is_the_same(sessions: Sessions) -> None:
    s = sessions.open()
    why = sessions.ended(s, "while True:\n    try:\n        while True:\n            pass\n"
                            "    except BaseException:\n        pass", timeout_s=1.0)
    assert why.status == "step_hung"


def test_a_fork_bomb_is_held_to_the_process_limit(sessions: Sessions) -> None:
    s = sessions.open()
    try:
        out = sessions.run(s, "import os\nwhile True:\n    os.fork()", timeout_s=5.0)
        assert out.status in ("error", "timeout"), out
        # no fork outlived the step: the session's init and the interpreter are all there is, and it answers
        left = sessions.run(s, "import os\nlen([p for p in os.listdir('/proc') if p.isdigit()])")
        assert left.value == "2", left
    except SessionEnded as why:
        assert why.status == "step_hung"
    # a bomb that swallows every failure: its interrupt kills every fork; the interpreter recovers if the interrupt
    # lands outside the cell's try, else the step is hung and the session ends; either way nothing of it is left
    stubborn = sessions.open()
    try:
        out = sessions.run(stubborn, "import os\nwhile True:\n    try:\n        os.fork()\n"
                                     "    except BaseException:\n        pass", timeout_s=2.0)
        assert out.status == "timeout"
        left = sessions.run(stubborn, "import os\nlen([p for p in os.listdir('/proc') if p.isdigit()])")
        assert left.value == "2", left
    except SessionEnded as why:
        assert why.status == "step_hung"


def test_memory_and_disk_are_capped_for_the_session(sessions: Sessions) -> None:
    s = sessions.open()
    out = sessions.run(s, "x = bytearray(600 * 1024 * 1024)")
    assert out.status == "error" and out.exception and out.exception["type"] == "MemoryError"
    out = sessions.run(s, "f = open('/work/big', 'wb')\nfor _ in range(64):\n    f.write(b'x' * (1 << 20))")
    assert out.status == "error" and out.exception and "No space" in out.exception["message"]
    assert sessions.run(s, "1 + 1").value == "2"
    # the session's memory cgroup counts what every process holds: many children, each within its own limit
    hog = "import os\nfor _ in range(12):\n    if os.fork() == 0:\n        b = bytearray(200 * 1024 * 1024)\n" \
          "        b[::4096] = b'x' * len(b[::4096])\n        import time; time.sleep(30)\nimport time; time.sleep(20)"
    try:
        sessions.run(s, hog, timeout_s=8.0)
    except SessionEnded as why:
        assert why.status in ("memory_exceeded", "step_hung"), why
    usage = s.usage().get("memory_bytes", 0)
    assert usage <= (256 + 16 + 64) << 20
    sessions.close(s)


def test_output_is_capped_per_step_and_never_blocks(sessions: Sessions) -> None:
    s = sessions.open()
    out = sessions.run(s, "print('x' * 1_000_000)\nimport os\nos.system('head -c 5000000 /dev/zero')")
    assert out.status == "ok" and out.truncated and len(out.stdout) <= 4096
    small = sessions.run(s, "print('fine')")
    assert small.stdout == "fine\n" and not small.truncated
    big = sessions.run(s, "'y' * 10_000_000")
    assert big.value is not None and len(big.value) < 10_000
    sessions.close(s)


def test_no_network_unless_asked(sessions: Sessions) -> None:
    s = sessions.open()
    out = sessions.run(s, "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)")
    assert out.status == "error"
    sessions.close(s)
    net = sessions.open(replace(SPEC, network="loopback"))
    ok = sessions.run(net, "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n'bound'")
    assert ok.value == "'bound'"
    sessions.close(net)


def test_the_interpreters_own_end_and_a_forged_answer_are_named(sessions: Sessions) -> None:
    s = sessions.open()
    assert sessions.ended(s, "import os\nos._exit(3)").status == "exited"
    forger = sessions.open()
    why = sessions.ended(forger, "import os\nos.write(3, b'Zgarbage that is no frame')\nimport time; time.sleep(1)")
    assert why.status == "protocol_error" and not why.infra


def test_cpu_seconds_are_the_sessions(sessions: Sessions) -> None:
    s = sessions.open(replace(SPEC, limits=replace(SPEC.limits, cpu_s=2)))
    why = sessions.ended(s, "while True:\n    try:\n        pass\n    except BaseException:\n        pass", 20.0)
    assert why.status in ("cpu_exceeded", "step_hung")
