"""The harness's trust boundary, through the real bubblewrap sandbox: everything the candidate's process sends the
judge is data. Each attack is a plain program submitted to the ``code`` verifier; since it runs in the candidate
process it may rewrite that process's copy of the harness (``send``) and so forge any reply."""
from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.code import (
    CodeRunner,
    humaneval,
    humaneval_reference,
    mbpp,
    mbpp_reference,
    runner_fixture,
    statuses,
)
from verifiers.audit.harness_attacks import PERMISSIVE, PLANT_PASSES, RESTARTED, forging
from verifiers.kinds.code.plan import build_plan
from verifiers.types import Status

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

ADD = {"test_list": ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(-1, 3) == 2"]}
LOOPED = {
    "test": "def check(candidate):\n    for n in range(5):\n        assert candidate(n) == n * n\n"
            "    assert abs(candidate(1.5) - 2.25) < 1e-9\n",
    "entry_point": "square",
}
ROUND_TRIP = {"test_list": ["assert decode(encode('abc')) == 'abc'", "assert decode(encode('xy z')) == 'xy z'"]}

EMIT_ALL = "[__unit__.__self__.emit(i, 'passed') for i in range(len(__unit__.__self__.timeouts))]"


runner = runner_fixture()


def assert_nothing_passes(runner: CodeRunner, program: str, reference: dict) -> None:
    v = runner.verify(program, reference)
    assert v.status == Status.OK and v.score == 0.0, v.details["tests"]


# ------------------------------------------------------------------------ module names are looked up, never imported

# Importing unittest's ``__main__`` runs test discovery in the working directory: the judge would import the file
# the program planted there and run it.
IMPORT_GADGET = (
    "import types\n"
    f"open('test_planted.py', 'w').write({PLANT_PASSES!r})\n"
    "runner = types.ModuleType('unittest.__main__')  # the harness sends it as a module-valued name\n"
    "def add(a, b):\n    return 0\n"
)


@needs_bwrap
def test_a_module_name_from_the_candidate_runs_no_import_in_the_judge(runner: CodeRunner) -> None:
    assert_nothing_passes(runner, IMPORT_GADGET, ADD)


@needs_bwrap
def test_a_module_the_judge_has_not_loaded_is_not_admitted(runner: CodeRunner) -> None:
    """The tests look at the judge's own state: the module is neither imported nor bound, under any name."""
    program = ("import types\nx = types.ModuleType('xml.dom.minidom')\nwave = types.ModuleType('wave')\n"
               "def add(a, b):\n    return a + b\n")
    probe = {"test_list": ["import sys\nassert 'xml.dom.minidom' not in sys.modules and 'wave' not in sys.modules",
                           "assert 'x' not in globals() and 'wave' not in globals() and add(1, 2) == 3"]}
    v = runner.verify(program, probe)
    assert v.score == 1.0, v.details["tests"]


@needs_bwrap
def test_module_names_mean_the_judges_own_modules(runner: CodeRunner) -> None:
    """A module name the tests use, aliased to another loaded module by the program or by a forged reply, is the
    judge's module of that name; an alias of a loaded module is the judge's copy of it."""
    program = forging({"m2": {"$m": "math"}, "cmath": {"$m": "math"}},
                      "import cmath as math\ndef area(r):\n    return 3 * r * r\n")
    probe = {"test_list": ["import sys\nassert math is sys.modules['math'] and m2 is sys.modules['math']"
                           " and 'cmath' not in globals()",
                           "assert math.isclose(area(2), 4 * math.pi)"]}
    v = runner.verify(program, probe)
    assert statuses(v) == ["passed", "failed"], v.details["tests"]


def test_the_preload_list_covers_what_the_references_use(shared_data: Path) -> None:
    """The judge admits only modules it loaded before the candidate existed, so the host must name every module the
    reference needs: HumanEval prompt and test imports, MBPP setup and test imports, and standard modules the tests
    use without importing them (a program's ``import math`` that the asserts rely on)."""
    stdlib = sys.stdlib_module_names
    refs = [humaneval_reference(t) for t in humaneval(shared_data)] + [mbpp_reference(t) for t in mbpp(shared_data)]
    refs.append({"test_list": ["assert math.isclose(area(2), 4 * math.pi)", "assert re.match('a', f())"],
                 "test_imports": ["import heapq as hq", "from collections import Counter"]})
    for reference in refs:
        plan = build_plan(reference)
        needed: set[str] = set()
        for source in (plan.setup, plan.judge_code, reference.get("prompt") or ""):
            tree = ast.parse(source)
            needed |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            needed |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        tree = ast.parse(plan.judge_code)
        bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        needed |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in stdlib} - bound
        assert needed <= set(plan.preload), (reference, needed - set(plan.preload))
    assert {"math", "re", "heapq", "collections"} <= set(build_plan(refs[-1]).preload)


# ------------------------------------------------------------------- names and values from the candidate are data

@needs_bwrap
def test_a_forged_builtins_namespace_does_not_reach_the_tests(runner: CodeRunner) -> None:
    program = forging({"__builtins__": {"$d": [["range", "@_empty"], ["abs", "@_zero"]]}},
                      "def _empty(*a, **k):\n    return []\ndef _zero(*a, **k):\n    return 0\n"
                      "def square(x):\n    return 0\n")
    assert_nothing_passes(runner, program, LOOPED)


@needs_bwrap
def test_forged_judge_names_at_load_change_nothing(runner: CodeRunner) -> None:
    forged = {"__eq__check": "@_yes", "__unit__": "@_yes", "check": "@_yes", "__name__": "@_yes",
              "not an identifier": "@_yes", "range": "@_yes"}
    program = PERMISSIVE + forging(forged, "def add(a, b):\n    return 0\n")
    assert_nothing_passes(runner, program, ADD)
    probe = {"test_list": ["assert 'not an identifier' not in globals() and __name__ == '__tests__'"]}
    assert runner.verify(program, probe).score == 1.0


BUILTIN_GADGETS = {
    # the function under test is the judge's own exec/eval, fed a string the program returns
    "exec": f"def encode(s):\n    return {PLANT_PASSES!r}\ndecode = exec\n",
    "eval": f"def encode(s):\n    return {EMIT_ALL!r}\ndecode = eval\n",
    # the same forged in the reply: a name whose wire value is a builtin by name
    "forged exec": forging({"decode": {"$bi": "exec"}}, f"def encode(s):\n    return {PLANT_PASSES!r}\n"),
    "forged eval": forging({"decode": {"$bi": "eval"}}, f"def encode(s):\n    return {EMIT_ALL!r}\n"),
}


@needs_bwrap
@pytest.mark.parametrize("program", BUILTIN_GADGETS.values(), ids=BUILTIN_GADGETS.keys())
def test_builtins_that_run_code_never_come_from_the_candidate(runner: CodeRunner, program: str) -> None:
    assert_nothing_passes(runner, program, ROUND_TRIP)


@needs_bwrap
def test_honest_builtin_values_still_cross(runner: CodeRunner) -> None:
    """Pure builtins (types, ``max``, exception classes) arrive as the judge's own; others, such as ``print``, as
    handles that run in the candidate's process."""
    program = "show = print\nbiggest = max\ndef kind(x):\n    return type(x) if x else ValueError\n"
    probe = {"test_list": ["assert biggest is max and kind(1) is int and kind(0) is ValueError",
                           "assert show('x') is None and show is not print"]}
    v = runner.verify(program, probe)
    assert v.score == 1.0, v.details["tests"]


# --------------------------------------------------------------------- a restart rebuilds nothing from the candidate

def restarting(forged: dict[str, object], crash_at: int = 1, extra: str = "") -> str:
    """The first start crashes its process on call ``crash_at`` (the judge restarts it for the next test); the
    restarted one sees the marker file and forges."""
    return RESTARTED + PERMISSIVE + extra + forging(
        forged, f"_calls = [0]\ndef add(*a):\n    _calls[0] += 1\n    if not _RESTARTED and _calls[0] == {crash_at}:\n"
                "        _os._exit(1)  # the judge restarts the program for the next test\n    return 0\n",
        armed="_RESTARTED")


NUMPY_ADD = {"test_list": ["import numpy as np\nassert np.allclose(add(1, 2), 3)",
                           "assert np.allclose(add(2, 2), 4)", "assert np.allclose(add(-1, 3), 2)"]}
BOUND_BY_TESTS = {"test_list": ["assert add(1, 2) == 3", "expected = 4\nassert add(2, 2) == expected",
                                "assert add(-1, 3) == expected - 2"]}
RESTART_ATTACKS = {
    "equality helper": (ADD, restarting({"__eq__check": "@_yes"})),
    "builtins": (ADD, restarting({"__builtins__": {"$d": [["AssertionError", {"$bi": "ValueError"}]]},
                                  "__eq__check": "@_yes"})),
    "module the tests imported": (NUMPY_ADD, restarting(
        {"np": "@_np"}, extra="class _NP:\n    def allclose(self, *a, **k):\n        return True\n_np = _NP()\n")),
    "name the test code bound": (BOUND_BY_TESTS, restarting({"expected": 2}, crash_at=2)),
}


@needs_bwrap
@pytest.mark.parametrize("case", RESTART_ATTACKS.values(), ids=RESTART_ATTACKS.keys())
def test_a_restarted_candidate_cannot_rebind_the_tests_names(runner: CodeRunner, case: tuple[dict, str]) -> None:
    reference, program = case
    v = runner.verify(program, reference)
    assert v.status == Status.OK and v.score == 0.0, v.details["tests"]
    assert "error" in statuses(v)  # the crash is what restarted the program


@needs_bwrap
def test_a_restart_gives_unchanged_program_names_their_new_handles(runner: CodeRunner) -> None:
    """The honest side: after each crash the next test calls the restarted program's functions, and a program name
    the test code rebound (``helper``) stays the test code's through later restarts."""
    program = ("import os\nwith open('starts', 'a') as f:\n    f.write('x')\nSTART = len(open('starts').read())\n"
               "def add(a, b):\n    if a == START:\n        os._exit(1)\n    return a + b\n"
               "def helper(x):\n    return -1\n")
    reference = {"test_list": ["assert add(1, 2) == 3", "helper = abs\nassert add(2, 2) == 4",
                               "assert add(-1, 3) == helper(-2)"]}
    v = runner.verify(program, reference)
    assert statuses(v) == ["error", "error", "passed"], v.details["tests"]


# ------------------------------------------------------------------------------ odd replies decide only their test

ODD_RAISES = {
    # StopIteration from a function under test would end a test's loop over map() early if it crossed as itself
    "StopIteration from a call": (
        {"test": "def check(candidate):\n    for r in map(candidate, [1, 2, 3]):\n        assert r == 0\n"
                 "    assert [candidate(x) for x in (4, 5)] == [0, 0]\n", "entry_point": "f"},
        "def f(x):\n    raise StopIteration\n"),
    "SystemExit from a call": (ADD, "def add(a, b):\n    raise SystemExit(0)\n"),
    "AssertionError subclass": (ADD, "class AssertionError(Exception):\n    pass\n"
                                     "def add(a, b):\n    raise AssertionError\n"),
}


@needs_bwrap
@pytest.mark.parametrize("case", ODD_RAISES.values(), ids=ODD_RAISES.keys())
def test_exceptions_by_name_stay_ordinary_failures(runner: CodeRunner, case: tuple[dict, str]) -> None:
    reference, program = case
    assert_nothing_passes(runner, program, reference)


FORGED_REPLIES = {  # raw JSON for every reply after the program's names
    "exception named SystemExit": '{"exc": ["SystemExit", ""]}',
    "exception named StopIteration": '{"exc": ["StopIteration", ""]}',
    "exception named ExceptionGroup": '{"exc": ["ExceptionGroup", "x"]}',
    "exception with a non-string name": '{"exc": [["StopIteration"], 7]}',
    "exception of the wrong shape": '{"exc": "AssertionError"}',
    "nested far too deep": '{"ok": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "module inside a value": '{"ok": {"$m": "os"}}',
    "builtin exec as a result": '{"ok": {"$bi": "exec"}}',
    "unhashable key": '{"ok": {"$d": [[[1], 2]]}}',
    "float past its range": '{"ok": {"$f": 1' + "0" * 400 + "}}",
}


@needs_bwrap
@pytest.mark.parametrize("reply", FORGED_REPLIES.values(), ids=FORGED_REPLIES.keys())
def test_forged_replies_pass_nothing(runner: CodeRunner, reply: str) -> None:
    program = (
        "import os as _os, sys as _sys\n_g = _sys._getframe(1).f_globals\n_send = _g['send']\n_seen = [0]\n"
        "def _forging_send(fd, obj):\n    _seen[0] += 1\n    if _seen[0] == 1:\n        return _send(fd, obj)\n"
        f"    data = {reply!r}.encode()\n    _os.write(fd, len(data).to_bytes(4, 'big') + data)\n"
        "_g['send'] = _forging_send\n"
        "def add(a, b):\n    return a + b\n"
    )
    assert_nothing_passes(runner, program, ADD)


@needs_bwrap
def test_giant_and_deep_values_decide_only_their_own_test(runner: CodeRunner) -> None:
    program = ("def add(a, b):\n    if a == 1:\n        return 10 ** 6000\n    if a == 2:\n"
               "        return 'x' * (8 << 20)\n    nested = 0\n    for _ in range(150):\n        nested = [nested]\n"
               "    return nested\n")
    v = runner.verify(program, ADD)
    assert statuses(v) == ["failed"] * 3, v.details["tests"]


# ------------------------------------------------------------------------ the judge reads nothing from the work dir


@needs_bwrap
def test_relative_names_in_the_judge_never_reach_the_candidates_files(runner: CodeRunner) -> None:
    """A file the program writes in its working directory is not what a relative name means to the test code (or to
    a module it loads lazily that reads a config file from the current directory)."""
    program = "open('planted.cfg', 'w').write('passed')\ndef add(a, b):\n    return a + b\n"
    probe = {"test_list": ["import os\nassert not os.path.exists('planted.cfg') and add(1, 2) == 3"]}
    v = runner.verify(program, probe)
    assert v.score == 1.0, v.details["tests"]


@needs_bwrap
def test_a_restarted_candidate_still_runs_in_its_work_dir(runner: CodeRunner) -> None:
    """After a crash the new candidate process starts where the first one ran: its files are there."""
    program = ("import os\nif not os.path.exists('state'):\n    open('state', 'w').write('1')\n"
               "def add(a, b):\n    if a == 1:\n        os._exit(3)\n"
               "    return a + b + int(open('state').read()) - 1\n")
    v = runner.verify(program, ADD)
    assert statuses(v) == ["error", "passed", "passed"], v.details["tests"]
