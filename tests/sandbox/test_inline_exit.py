"""An inline Python program (a fork of the warm interpreter) ends as ``python main.py`` ends: the same exit status
or signal, stdout, stderr and files, for every way a program can end, checked against a real interpreter run on
the same program. The sandbox skips the interpreter's teardown, so each case here is one its emulation must get
right: threads still running, atexit functions, finalizers, files left open, SystemExit's codes, uncaught
exceptions, hooks the program set, output it never flushed."""
from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.api import Limits, RunRequest, RunResult
from sandbox.bwrap import BwrapBackend, BwrapConfig

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

HELPER = "log = open('helper.txt', 'w')\nlog.write('from a module of the program')\n"

PROGRAMS = {
    "returns": "print('out')\n",
    "no newline, never flushed": "import sys\nsys.stdout.write('no newline')\nsys.stderr.write('err, no newline')\n",
    "uncaught exception": "def f():\n    raise ValueError('boom')\nprint('before', flush=True)\nf()\n",
    "exception chain": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise KeyError('k') from e\n",
    "syntax error": "print('x'\n",
    "exit with text": "import sys\nprint('out')\nsys.exit('bye')\n",
    "exit 3": "import sys\nsys.exit(3)\n",
    "exit None": "raise SystemExit\n",
    "exit 300": "raise SystemExit(300)\n",
    "exit -1": "raise SystemExit(-1)\n",
    "exit True": "raise SystemExit(True)\n",
    "exit huge": "raise SystemExit(1 << 70)\n",
    "exit a tuple": "raise SystemExit(1, 2)\n",
    "exit() builtin": "print('a')\nexit(4)\n",
    "KeyboardInterrupt": "print('a', flush=True)\nraise KeyboardInterrupt\n",
    "atexit, in reverse order": (
        "import atexit\natexit.register(print, 'first registered')\natexit.register(print, 'second registered')\n"
        "print('main')\n"),
    "atexit that raises": "import atexit\ndef bad():\n    raise RuntimeError('in atexit')\natexit.register(bad)\n",
    "finalizer at exit": "class A:\n    def __del__(self):\n        print('del ran')\na = A()\nprint('main')\n",
    "finalizer in a cycle": (
        "class A:\n    def __del__(self):\n        print('cycle del ran')\na = A()\na.me = a\ndel a\n"),
    "finalizer after an exception": (
        "class A:\n    def __del__(self):\n        print('del after error')\na = A()\nraise ValueError('x')\n"),
    "file left open": "f = open('o.txt', 'w')\nf.write('unflushed data')\n",
    "file left open in a function's closure": (
        "def make():\n    f = open('o.txt', 'w')\n    def w(s):\n        f.write(s)\n    return w\n"
        "w = make()\nw('closure data')\n"),
    "file left open by an imported module": "import helper\nprint('imported')\n",
    "stdout replaced by a file": "import sys\nsys.stdout = open('o.txt', 'w')\nprint('into the file')\n",
    "non-daemon thread outlives main": (
        "import threading, time\ndef w():\n    time.sleep(0.2)\n    print('thread done')\n"
        "threading.Thread(target=w).start()\nprint('main', flush=True)\n"),
    "daemon thread is dropped": (
        "import threading, time\ndef w():\n    time.sleep(5)\n    print('never')\n"
        "threading.Thread(target=w, daemon=True).start()\nprint('main')\n"),
    "custom excepthook": (
        "import sys\ndef hook(t, v, tb):\n    print('hooked', t.__name__, v, file=sys.stderr)\n"
        "sys.excepthook = hook\nraise LookupError('lost')\n"),
    "os._exit drops buffers": "import os\nprint('lost')\nos._exit(5)\n",
    "stdout that cannot flush": (
        "import sys\nclass W:\n    def write(self, s):\n        return len(s)\n    def flush(self):\n"
        "        raise OSError('cannot flush')\nsys.stdout = W()\nprint('x')\n"),
    "stderr that cannot flush": (
        "import sys\nclass W:\n    def write(self, s):\n        return len(s)\n    def flush(self):\n"
        "        raise OSError('cannot flush')\nsys.stderr = W()\nprint('x')\n"),
    "stdout closed by the program": "import sys\nprint('x')\nsys.stdout.close()\n",
    # found by a red team: each ended otherwise than in python before _finish followed it
    # python flushes the original stdout when it is finalized; _finish flushes only the current sys.stdout
    "answer printed, then stdout replaced": "import sys, io\nprint('answer')\nsys.stdout = io.StringIO()\n",
    "answer printed, then sys.stdout deleted": "import sys\nprint('answer')\ndel sys.stdout\n",
    # _finish clears the program's imported modules before __main__ (its key keeps the supervisor's early slot)
    "finalizer in __main__ uses an imported module": (
        "import collections\nclass Out:\n    def __init__(self):\n        self.parts = []\n"
        "    def __del__(self):\n        print(' '.join(collections.deque(self.parts)))\n"
        "out = Out()\nout.parts.append('answer')\n"),
    # _flush_std: getattr(stream, 'closed', False) lets a non-AttributeError escape; python treats it as open
    "stdout whose closed raises": (
        "import sys\nclass W:\n    def __init__(s, f): s.f = f\n    def write(s, x): return s.f.write(x)\n"
        "    def flush(s): s.f.flush()\n    @property\n    def closed(s): raise ValueError('no')\n"
        "sys.stdout = W(sys.stdout)\nprint('answer')\n"),
    # _exit_status computes code & 0xFF in Python: an int subclass decides its own status (python: PyLong_AsLong)
    "SystemExit of an int subclass": "import sys\nclass E(int):\n    def __and__(self, o): return 0\nsys.exit(E(1))\n",
    # _finish calls the os module's _exit, which the program can replace: status 3 becomes 0
    "os._exit replaced": "import os\nos._exit = lambda s: None\nprint('answer')\nraise SystemExit(3)\n",
    # python honours a SystemExit raised by sys.excepthook (handle_system_exit); _excepthook swallows it
    "excepthook exits 0": "import sys\nsys.excepthook = lambda *a: sys.exit(0)\nprint('answer')\nraise ValueError\n",
    # the traceback of an atexit SystemExit shows a supervisor frame python has not
    "atexit raises SystemExit": "import atexit, sys\natexit.register(sys.exit, 3)\nprint('answer')\n",
}
ADDRESS = re.compile(r" at 0x[0-9a-f]+")


class Runner:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.backend = BwrapBackend(BwrapConfig(warm_pool=1, max_concurrent=1))
        self.loop.run_until_complete(self.backend.start())

    def run(self, code: str) -> RunResult:
        request = RunRequest(code=code, files={"helper.py": HELPER}, collect=["o.txt", "helper.txt"],
                             limits=Limits(wall_s=20, cpu_s=20), network="none")
        return self.loop.run_until_complete(self.backend.run(request))

    def close(self) -> None:
        self.loop.run_until_complete(self.backend.close())
        self.loop.close()


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    r = Runner()
    yield r
    r.close()


def plain(code: str, work: Path) -> tuple[int, str, str, dict[str, str]]:
    """The program run by a fresh interpreter as ``python main.py`` in ``work`` (which plays /work)."""
    (work / "main.py").write_text(code)
    (work / "helper.py").write_text(HELPER)
    done = subprocess.run([sys.executable, "-E", "-s", "main.py"], cwd=work, capture_output=True, text=True,
                          timeout=60)
    files = {name: (work / name).read_text() for name in ("o.txt", "helper.txt") if (work / name).exists()}
    return done.returncode, done.stdout, done.stderr.replace(str(work), "/work"), files


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_inline_program_ends_as_python_does(runner: Runner, tmp_path: Path, name: str) -> None:
    code = PROGRAMS[name]
    want_status, want_out, want_err, want_files = plain(code, tmp_path)
    got = runner.run(code)
    status = -got.signal if got.signal is not None else got.exit_code
    assert status == want_status, (got, want_err)
    assert got.stdout == want_out
    assert ADDRESS.sub(" at 0x", got.stderr) == ADDRESS.sub(" at 0x", want_err)
    assert got.files == want_files
