"""Red-team findings against the host-compiled test bytecode (verifiers/kinds/code/plan.py ``_bytecode``): each
failed before the fix."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.code import CodeRunner, runner_fixture

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
runner = runner_fixture()


def _nested_finally(depth: int) -> str:
    """try/finally nested in finally bodies: CPython compiles each finally body twice, so 2**depth copies."""
    source = ""
    for i in range(depth):
        source += " " * i + "try:\n" + " " * (i + 1) + "pass\n" + " " * i + "finally:\n"
    return source + " " * depth + "assert f(1)\n"


PROBE = """
import sys, time
from verifiers.kinds.code.plan import build_plan
from verifiers.types import InvalidReference
ref = {"test_list": [sys.argv[1]] * 3}
start = time.monotonic()
try:
    plan = build_plan(ref)
    print("PLANNED", len(plan.tests_bytecode), time.monotonic() - start)
except InvalidReference as exc:
    print("INVALID", exc)
"""


def test_a_reference_whose_bytecode_explodes_is_not_compiled_on_the_host() -> None:
    """A 3 KB reference (three asserts, each in 19 nested try/finally, the compiler's block limit with the test's
    ``with``) parses fine, but CPython compiles each finally body once per way out of its try: compiling it on the
    host (on the event loop, in build_plan) took 26 s of CPU and 184 MB of bytecode, and a 1 MB reference holds
    hundreds. The plan must come back at once, its tests left for the judge to compile under the sandbox's limits."""
    source = _nested_finally(19)
    assert len(source) < 1200
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, source], capture_output=True, text=True, timeout=15,
                              cwd=str(Path(__file__).resolve().parents[3]))
    except subprocess.TimeoutExpired:
        pytest.fail("build_plan was still compiling the reference after 15 s")
    assert done.stdout.startswith("PLANNED 0 "), (done.stdout, done.stderr[-500:])


@needs_bwrap
def test_host_bytecode_evaluates_annotations_as_the_tests_source_does(runner: CodeRunner) -> None:
    """plan.py has ``from __future__ import annotations`` and its compile() inherits it: the tests' annotations
    become strings in the host's bytecode, though the same text compiled by the harness evaluates them."""
    reference = {"test_list": ["def h(x: int): pass\nassert add(1, 2) == 3 and h.__annotations__['x'] is int"]}
    v = runner.verify("def add(a, b):\n    return a + b\n", reference)
    assert v.score == 1.0, v.details["tests"]
