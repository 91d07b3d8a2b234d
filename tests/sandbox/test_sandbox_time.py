"""Time limits CPU first: ``cpu_s`` is the run's processes together, and a wall-clock timeout says how much CPU the
program had used (docs/sandbox.md, "Time limits: CPU first")."""
from __future__ import annotations

import shutil

import pytest

from sandbox.api import Limits, RunStatus
from tests.support.sandbox import OneSandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def spinning_children(count: int, each_s: float, wait: str) -> str:
    """A program whose ``count`` children each spin ``each_s`` of their own CPU time; ``wait`` is how the parent
    then waits (it computes nothing itself)."""
    return ("import os, time\n"
            f"for _ in range({count}):\n"
            "    if os.fork() == 0:\n"
            "        start = time.process_time()\n"
            f"        while time.process_time() - start < {each_s}:\n"
            "            pass\n"
            "        os._exit(0)\n" + wait)


def test_children_that_each_stay_under_the_cpu_limit_spend_it_together(box: OneSandbox) -> None:
    """Three children of 0.6 s each: every one is under RLIMIT_CPU's 1 s, the run is not; the CPU limit ends it long
    before the wall clock would."""
    result = box.run(spinning_children(3, 0.6, "for _ in range(3):\n    os.wait()\nprint('done')\n"),
                     limits=Limits(cpu_s=1, wall_s=60))
    assert result.status is RunStatus.TIMEOUT and "done" not in result.stdout, result
    assert "CPU-time limit of 1s" in result.reason and "together" in result.reason, result.reason


def test_cpu_ms_counts_every_process_of_the_run(box: OneSandbox) -> None:
    """Children the program never reaps (it exits, and the run's init reaps them) are the run's CPU time too."""
    wait = ("while True:\n    try:\n        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT | os.WNOHANG)\n"
            "        if all(open(f'/proc/{p}/stat').read().split(') ')[1][0] == 'Z'\n"
            "               for p in open(f'/proc/{os.getpid()}/task/{os.getpid()}/children').read().split()):\n"
            "            break\n    except ChildProcessError:\n        break\n    time.sleep(0.05)\nprint('done')\n")
    result = box.run(spinning_children(2, 0.3, wait), limits=Limits(cpu_s=5, wall_s=60))
    assert result.status is RunStatus.OK and "done" in result.stdout, result
    assert result.cpu_ms >= 2 * 300 * 0.9, result.cpu_ms


def test_a_wall_clock_timeout_names_itself_and_the_cpu_used(box: OneSandbox) -> None:
    result = box.run("import time\ntime.sleep(60)\n", limits=Limits(cpu_s=5, wall_s=1))
    assert result.status is RunStatus.TIMEOUT, result
    assert "wall-clock limit of 1s reached with" in result.reason and "of the 5s CPU-time limit used" in result.reason
