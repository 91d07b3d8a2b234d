"""Attacks on sandbox reuse: an inline Python program is a fork of its run's manager, itself a fork of the
supervisor that served every earlier run of the sandbox. Whatever the supervisor's loop keeps between runs (the
previous manager's pid in its namespace, which counts every process earlier runs created; its exit code) must not
be reachable from the program's own interpreter state."""
from __future__ import annotations

import shutil

import pytest

from sandbox.api import RunStatus
from tests.support.sandbox import OneSandbox, same_sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FORKS = ("import os\nfor _ in range(50):\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n"
         "    os.waitpid(pid, 0)\n")
# every frame below the program's, with its locals: the supervisor's loop would be one of them had the manager
# returned into the program from it
FRAMES = (
    "import sys\nf = sys._getframe().f_back\nwhile f is not None:\n"
    "    print('FRAME', f.f_code.co_name, sorted(f.f_locals))\n    f = f.f_back\n"
)


def test_the_programs_stack_holds_nothing_of_the_supervisors_loop(box: OneSandbox) -> None:
    earlier = box.run(FORKS + "print('forked')\n")
    later = box.run(FRAMES)
    assert earlier.status is RunStatus.OK and later.status is RunStatus.OK, later
    same_sandbox(earlier, later)
    frames = [line.split()[1] for line in later.stdout.splitlines() if line.startswith("FRAME")]
    assert not {"_supervise", "_fork_manager", "_manage", "_one_run", "main"} & set(frames), later.stdout
