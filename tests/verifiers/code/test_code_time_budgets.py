"""A test's budget is CPU time, so a program's verdict does not depend on the machine's load; a wall-clock backstop,
which names itself, ends a program that waits instead of computing. Through the real engine and bubblewrap sandbox,
for the two-process harness (function and assert tests) and for stdin/stdout cases (the sandbox's own clock)."""
from __future__ import annotations

import shutil

import pytest

from tests.support.code import CodeRunner, runner_fixture, statuses
from tests.support.load import cpu_hog
from verifiers.types import Status

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

runner = runner_fixture()

NEED_S, BUDGET_S = 0.4, 1.2  # the program's CPU per test, and each test's CPU budget
SPIN = ("import time\n"
        "def spin():\n"  # NEED_S of this process's own CPU time, however long that takes on the wall clock
        f"    start = time.process_time()\n    while time.process_time() - start < {NEED_S}:\n        pass\n")
FUNCTION = SPIN + "def double(x):\n    spin()\n    return 2 * x\n"
STDIO = SPIN + "x = int(input())\nspin()\nprint(2 * x)\n"
REFERENCES = {
    "humaneval": (FUNCTION, {"test": "def check(candidate):\n    assert candidate(1) == 2\n"
                                     "    assert candidate(5) == 10\n",
                             "entry_point": "double", "timeout_s": BUDGET_S}),
    "mbpp": (FUNCTION, {"test_list": ["assert double(1) == 2", "assert double(5) == 10"], "timeout_s": BUDGET_S}),
    "stdio": (STDIO, {"cases": [{"input": "1\n", "output": "2\n"}, {"input": "5\n", "output": "10\n"}],
                      "timeout_s": BUDGET_S}),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", REFERENCES.values(), ids=REFERENCES.keys())
def test_a_cpu_bound_program_passes_beside_a_cpu_hog(runner: CodeRunner, case: tuple[str, dict]) -> None:
    """Beside six spinning processes per CPU the program gets a seventh of a CPU or less, so each test takes several
    times its budget on the wall clock (a wall-clock budget timed it out); its CPU time stays well inside the budget."""
    program, reference = case
    quiet = runner.verify(program, reference)
    assert quiet.score == 1.0, quiet.details["tests"]
    with cpu_hog():
        busy = runner.verify(program, reference)
    assert busy.status == Status.OK and statuses(busy) == statuses(quiet) == ["passed", "passed"], busy.details["tests"]


SLEEPS = {
    "function": ("import time\ndef double(x):\n    if x == 5:\n        time.sleep(600)\n    return 2 * x\n",
                 {"test_list": ["assert double(1) == 2", "assert double(5) == 10", "assert double(2) == 4"]}),
    "stdio": ("import time\nx = int(input())\nif x == 5:\n    time.sleep(600)\nprint(2 * x)\n",
              {"cases": [{"input": str(x), "output": str(2 * x)} for x in (1, 5, 2)]}),
}


@pytest.mark.parametrize("case", SLEEPS.values(), ids=SLEEPS.keys())
def test_the_wall_clock_backstop_ends_a_sleeping_program_and_says_so(runner: CodeRunner,
                                                                    case: tuple[str, dict]) -> None:
    """A program that sleeps spends no CPU: the backstop (3 x 0.5 s + 2 s) ends the test, naming the wall clock and the
    CPU time used, and the next test still runs."""
    program, reference = case
    v = runner.verify(program, {**reference, "timeout_s": 0.5})
    assert statuses(v) == ["passed", "timeout", "passed"], v.details["tests"]
    message = v.details["tests"][1]["message"]
    assert "wall-clock" in message and "3.5s" in message and "CPU" in message, message


FORKS = {  # the work spread over twelve children that spin while the program waits for them
    "function": ("import os\ndef double(x):\n    if x == 5:\n        for _ in range(12):\n"
                 "            if os.fork() == 0:\n                while True:\n                    pass\n"
                 "        os.wait()\n    return 2 * x\n",
                 {"test_list": ["assert double(1) == 2", "assert double(5) == 10", "assert double(2) == 4"]}),
    "stdio": ("import os\nx = int(input())\nif x == 5:\n    for _ in range(12):\n        if os.fork() == 0:\n"
              "            while True:\n                pass\n    os.wait()\nprint(2 * x)\n",
              {"cases": [{"input": str(x), "output": str(2 * x)} for x in (1, 5, 2)]}),
}


@pytest.mark.parametrize("case", FORKS.values(), ids=FORKS.keys())
def test_cpu_spread_over_child_processes_counts_against_the_budget(runner: CodeRunner,
                                                                   case: tuple[str, dict]) -> None:
    """Children each under the per-process CPU limit, and a parent that only waits: their CPU time together is the
    test's, so the CPU limit (not the wall clock) ends it; nothing of it runs on into the next test. Twelve children
    spend the 0.25 s budget before its 2.75 s backstop with a hundred and thirtieth of a CPU each."""
    program, reference = case
    v = runner.verify(program, {**reference, "timeout_s": 0.25})
    assert statuses(v) == ["passed", "timeout", "passed"], v.details["tests"]
    message = v.details["tests"][1]["message"]
    assert "CPU" in message and "wall-clock" not in message, message
