"""``run_cases``: one program over many stdins in few sandboxes, each case as if it ran alone (bubblewrap backend)."""
from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator

import pytest

from sandbox.api import Limits, RunRequest, RunResult, RunStatus
from sandbox.bwrap import BwrapBackend, BwrapConfig

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


class Cases:
    def __init__(self, **config: float) -> None:
        self.loop = asyncio.new_event_loop()
        self.backend = BwrapBackend(BwrapConfig(warm_pool=1, **config))

    def run(self, code: str, stdins: list[str], language: str = "python", **limits: float) -> list[RunResult]:
        request = RunRequest(code=code, language=language, limits=Limits(**limits))
        return self.loop.run_until_complete(self.backend.run_cases(request, stdins))

    def close(self) -> None:
        self.loop.run_until_complete(self.backend.close())
        self.loop.close()


@pytest.fixture(scope="module")
def cases() -> Iterator[Cases]:
    runner = Cases()
    yield runner
    runner.close()


MIXED = (
    "import sys\n"
    "n = int(input())\n"
    "if n == 1:\n    sys.exit(3)\n"
    "if n == 2:\n    while True: pass\n"
    "if n == 3:\n    print('x' * 5000)\n"
    "if n == 4:\n    b = bytearray(400 << 20)\n"
    "if n == 5:\n    print('oops', file=sys.stderr); raise ValueError('bad')\n"
    "print(n * 10)\n"
)


def test_each_case_gets_its_own_status_and_output(cases: Cases) -> None:
    got = cases.run(MIXED, [f"{n}\n" for n in range(7)], wall_s=1, cpu_s=1, memory_mb=256, output_bytes=1000)
    assert [r.status for r in got] == [RunStatus.OK, RunStatus.RUNTIME_ERROR, RunStatus.TIMEOUT,
                                       RunStatus.OUTPUT_EXCEEDED, RunStatus.MEMORY_EXCEEDED, RunStatus.RUNTIME_ERROR,
                                       RunStatus.OK]
    assert (got[0].stdout, got[6].stdout, got[1].exit_code) == ("0\n", "60\n", 3)
    assert len(got[3].stdout) == 1000 and got[3].truncated
    assert "ValueError: bad" in got[5].stderr and got[5].stdout == ""


def test_nothing_a_case_starts_survives_into_the_next(cases: Cases) -> None:
    """A daemon (double fork + setsid, its stdio let go so no pipe waits for it) that would kill later cases is gone
    by then."""
    program = (
        "import os, sys, time\n"
        "n = int(input())\n"
        "if n == 0 and os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        null = os.open('/dev/null', os.O_RDWR)\n"
        "        for fd in (0, 1, 2):\n"
        "            os.dup2(null, fd)\n"
        "        time.sleep(0.5)  # case 0 has ended by then\n"
        "        while True:\n"
        "            time.sleep(0.01)\n"
        "            for pid in os.listdir('/proc'):\n"
        "                if pid.isdigit() and int(pid) not in (1, os.getpid()):\n"
        "                    try: os.kill(int(pid), 9)\n"
        "                    except OSError: pass\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
        "print(n, len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
    )
    got = cases.run(program, ["0", "1", "2"], wall_s=5)
    assert [r.status for r in got] == [RunStatus.OK] * 3, got
    assert [r.stdout for r in got[1:]] == ["1 2\n", "2 2\n"]  # the supervisor and the case itself, nothing else


def test_a_compiled_program_compiles_once_and_a_compile_error_answers_every_case(cases: Cases) -> None:
    if not cases.backend.languages().get("cpp"):
        pytest.skip("cpp toolchain not installed on this host")
    source = '#include <cstdio>\nint main(){int a; if(scanf("%d",&a)!=1) return 2; printf("%d\\n", a * 3);}'
    got = cases.run(source, ["1", "2", "x"], language="cpp")
    assert [(r.status, r.stdout, r.exit_code) for r in got] == [
        (RunStatus.OK, "3\n", 0), (RunStatus.OK, "6\n", 0), (RunStatus.RUNTIME_ERROR, "", 2)]
    broken = cases.run("int main({", ["1", "2"], language="cpp")
    assert [r.status for r in broken] == [RunStatus.COMPILE_ERROR] * 2 and "error" in broken[0].compile_output


def test_a_spent_budget_continues_in_another_sandbox_in_order() -> None:
    """No sandbox (and so no slot) is held past its batch budget: the rest of the cases take a new turn."""
    runner = Cases(batch_budget_s=0.3)
    try:
        before = runner.backend.stats["runs"]
        got = runner.run("import time\nn = int(input())\ntime.sleep(0.1)\nprint(n + 1)\n", [str(i) for i in range(9)])
        assert [r.stdout for r in got] == [f"{i + 1}\n" for i in range(9)]
        assert runner.backend.stats["runs"] - before >= 3
    finally:
        runner.close()
