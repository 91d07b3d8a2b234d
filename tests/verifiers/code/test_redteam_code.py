"""Attacks on the code harness by a policy that writes wrong programs, through the real bubblewrap sandbox and real
HumanEval/MBPP references where one fits. Each test asserts the safe outcome: the wrong program scores below what
it earns (usually 0), and nothing it does turns its score into a null (``error``/``unavailable``) verdict, which a
trainer would drop instead of counting as a wrong answer."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.code import CodeRunner, humaneval, humaneval_reference, runner_fixture
from verifiers.types import Status

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

runner = runner_fixture()

ADD = {"test_list": ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(-1, 3) == 2"]}


def scored_zero(runner: CodeRunner, program: str, reference: dict[str, Any]) -> None:
    v = runner.verify(program, reference)
    assert v.status == Status.OK and v.score == 0.0, (v.status, v.reason, v.details.get("tests"))


@pytest.fixture(scope="module")
def he(shared_data: Path) -> dict[str, dict[str, Any]]:
    return {t["task_id"]: t for t in humaneval(shared_data)}


# ------------------------------------------------------------------------------- state the fork copies: RNG replay

# HumanEval/38 and /50 draw the hidden plaintext from the module-level ``random``; the program's copy of the judge's
# generator (the candidate is a fork) would replay it and return the plaintext without decoding anything.
RANDOM_REPLAY = ("import random as _r\nimport string as _s\ndef {name}(s):\n"
                 "    return ''.join(_r.choice(_s.ascii_lowercase) for _ in range(_r.randint(10, 20)))\n")


@needs_bwrap
@pytest.mark.parametrize("task", [("HumanEval/38", "decode_cyclic"), ("HumanEval/50", "decode_shift")])
def test_replaying_the_judges_random_module_passes_nothing(runner: CodeRunner, he: dict, task: tuple[str, str]) -> None:
    tid, name = task
    scored_zero(runner, RANDOM_REPLAY.format(name=name), humaneval_reference(he[tid]))


# The same with numpy's global generator, which (unlike ``random``) is not reseeded in a forked child: a reference
# whose tests import numpy.random had the judge seed it before forking the candidate, so the program's copy drew the
# same "hidden" plaintexts.
SHIFT = "def encode(s):\n    return ''.join(chr((ord(c) - 97 + 5) % 26 + 97) for c in s)\n"
NUMPY_DECODE = {
    "test": "def check(candidate):\n    import numpy.random\n    import numpy as np\n    for _ in range(50):\n"
            "        s = ''.join(chr(97 + int(i)) for i in np.random.randint(0, 26, size=12))\n"
            "        assert candidate(encode(s)) == s\n",
    "entry_point": "decode",
    "prompt": SHIFT + "def decode(s):\n    \"\"\"Inverse of encode.\"\"\"\n",
}
NUMPY_REPLAY = ("import numpy as np\ndef decode(s):\n"
                "    return ''.join(chr(97 + int(i)) for i in np.random.randint(0, 26, size=12))\n")


@needs_bwrap
def test_replaying_numpys_global_generator_passes_nothing(runner: CodeRunner) -> None:
    pytest.importorskip("numpy")
    scored_zero(runner, NUMPY_REPLAY, NUMPY_DECODE)
    honest = "def decode(s):\n    return ''.join(chr((ord(c) - 97 - 5) % 26 + 97) for c in s)\n"
    assert runner.verify(honest, NUMPY_DECODE).score == 1.0


# ---------------------------------------------------------------------------------------------- signals to the judge

def _signalling(body: str) -> str:
    """A grandchild that outlives the candidate's restarts and signals the judge (the candidate's parent)."""
    return ("import os, signal, time\n_judge = os.getppid()\nif os.fork() == 0:\n"
            + "".join(f"    {line}\n" for line in body.splitlines())
            + "    os._exit(0)\ndef add(a, b):\n    time.sleep(0.05)\n    return 0\n")


SIGNALS = {
    # KeyboardInterrupt raised anywhere in the judge, also outside the test code (its report loop): a traceback and
    # exit status 1 would read as "the harness crashed" (a null verdict) instead of the program's 0
    "SIGINT storm": "while True:\n    try:\n        os.kill(_judge, signal.SIGINT)\n    except OSError:\n"
                    "        break\n    time.sleep(0.001)",
    "SIGINT once": "time.sleep(0.02)\nos.kill(_judge, signal.SIGINT)",
    # frozen past the tests' deadlines, then thawed: the deadlines are the judge's clock, not the program's
    "SIGSTOP then SIGCONT": "os.kill(_judge, signal.SIGSTOP)\ntime.sleep(1.5)\nos.kill(_judge, signal.SIGCONT)",
    "SIGTERM": "time.sleep(0.05)\nos.kill(_judge, signal.SIGTERM)",
    "SIGCHLD storm": "for _ in range(20000):\n    os.kill(_judge, signal.SIGCHLD)",
}


@needs_bwrap
@pytest.mark.parametrize("body", SIGNALS.values(), ids=SIGNALS.keys())
def test_signals_to_the_judge_score_zero_never_null(runner: CodeRunner, body: str) -> None:
    scored_zero(runner, _signalling(body), ADD)


# ----------------------------------------------------------------------------- the plan: what counts as one test

# A check that asserts through a helper it defines: the helper's ``def`` held the assert, so it was taken for a test
# (one that passes by defining a function), while the calls that really test the program ran outside any test, and
# their failure only marked the tests after them. A program returning 0 scored 1.0 and 2/2.
NESTED_HELPER = {
    "test": "def check(candidate):\n    def ok(x, want):\n        assert candidate(x) == want\n"
            "    ok(1, 1)\n    ok(2, 4)\n    ok(3, 9)\n",
    "entry_point": "square",
}
MIXED_HELPER = {
    "test": "def _same(a, b):\n    assert a == b, (a, b)\n\ndef check(candidate):\n    assert candidate(0) == 0\n"
            "    def ok(x, want):\n        _same(candidate(x), want)\n    ok(2, 4)\n    _same(candidate(3), 9)\n",
    "entry_point": "square",
}


@needs_bwrap
@pytest.mark.parametrize("reference", [NESTED_HELPER, MIXED_HELPER], ids=["nested helper", "mixed helpers"])
def test_asserting_through_helpers_gives_no_free_tests(runner: CodeRunner, reference: dict[str, Any]) -> None:
    wrong = runner.verify("def square(x):\n    return 0\n", reference)
    assert wrong.status == Status.OK and wrong.score < 0.5, wrong.details["tests"]
    assert all(not t["name"].startswith("def ") for t in wrong.details["tests"]), wrong.details["tests"]
    right = runner.verify("def square(x):\n    return x * x\n", reference)
    assert right.score == 1.0, right.details["tests"]


# ------------------------------------------------------------------- trouble the test code swallows decides the test

# The reference's tests expect an exception and catch it with a bare ``except:``. A program that never raises makes
# its process unreachable instead, so that the judge's request fails with CandidateGone, which the bare except
# swallows as if the program had raised. Inside a test, every such failure must decide the test as an error (as a
# crash seen on the reply did); outside any test (check's own statements), it must end the tests as an uncaught one
# would have.
CLOSE_REQUESTS = (  # the candidate closes its end of the judge's request pipe: the judge's next write fails (EPIPE)
    "import os, fcntl\n"
    "def _close_requests():\n"
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:\n"
    "                os.close(fd)\n"
    "        except OSError:\n"
    "            pass\n"
)
RAISES_ON_NEGATIVE = {"test_list": [
    "assert isqrt(16) == 4",
    "raised = False\ntry:\n    isqrt(-1)\nexcept:\n    raised = True\nassert raised",
    "raised = False\ntry:\n    isqrt(-4)\nexcept:\n    raised = True\nassert raised",
]}
SWALLOW_ATTACKS = {
    # the request of the next test fails on write: no reply was ever read
    "request pipe closed": (RAISES_ON_NEGATIVE,
                            CLOSE_REQUESTS + "def isqrt(n):\n    _close_requests()\n    return 0\n"),
    # the process dies on the call itself (seen on the reply)
    "exit on the call": (RAISES_ON_NEGATIVE, "import os\ndef isqrt(n):\n    if n < 0:\n        os._exit(0)\n"
                                             "    return 0\n"),
    # a HumanEval-style check whose try/except is one of check's own statements, not a test: the crash there was
    # swallowed outside any test and the next test passed
    "outside any test": ({
        "test": "def check(candidate):\n    assert candidate(16) == 4\n    raised = False\n    try:\n"
                "        candidate(-1)\n    except:\n        raised = True\n    assert raised\n",
        "entry_point": "isqrt"}, "import os\ndef isqrt(n):\n    if n < 0:\n        os._exit(0)\n    return 0\n"),
    # after a crash in the first test, the check's ``candidate`` is a handle of the dead process: using it fails
    # without a reply, and the bare except swallowed that too
    "stale handle": ({
        "test": "def check(candidate):\n    assert candidate(16) == 4\n    raised = False\n    try:\n"
                "        candidate(-1)\n    except:\n        raised = True\n    assert raised\n",
        "entry_point": "isqrt"}, "import os\ndef isqrt(n):\n    os._exit(0)\n"),
}


@needs_bwrap
@pytest.mark.parametrize("case", SWALLOW_ATTACKS.values(), ids=SWALLOW_ATTACKS.keys())
def test_a_crash_the_test_code_swallows_passes_nothing(runner: CodeRunner, case: tuple[dict, str]) -> None:
    reference, program = case
    scored_zero(runner, program, reference)


@needs_bwrap
def test_a_program_that_raises_still_passes_a_bare_except(runner: CodeRunner) -> None:
    honest = "def isqrt(n):\n    if n < 0:\n        raise ValueError(n)\n    return int(n ** 0.5)\n"
    v = runner.verify(honest, RAISES_ON_NEGATIVE)
    assert v.score == 1.0, v.details["tests"]
    v = runner.verify(honest, SWALLOW_ATTACKS["outside any test"][0])
    assert v.score == 1.0, v.details["tests"]


# ------------------------------------------------------------------------------------------ value decoding

@needs_bwrap
def test_a_complex_with_non_finite_parts_is_a_value_not_a_broken_protocol(runner: CodeRunner) -> None:
    """The candidate's encoder tags a non-finite part ({"$f": "inf"}); the judge read the parts with float() and
    called the honest answer a broken protocol (an error, the program stopped)."""
    reference = {"test_list": ["import math\nassert f(1) == complex(math.inf, 1)", "assert f(2) == complex(2, 0)"]}
    v = runner.verify("def f(x):\n    return complex(float('inf'), 1) if x == 1 else complex(x, 0)\n", reference)
    assert v.score == 1.0, v.details["tests"]
    assert runner.verify("def f(x):\n    return complex(0, 0)\n", reference).score == 0.0
