"""The code verifier through the real bubblewrap sandbox: scoring, per-test outcomes, and attacks that must fail."""
from __future__ import annotations

import json
import shutil

import pytest

from sandbox.api import Limits, RunRequest
from tests.support.code import CodeRunner, runner_fixture, statuses
from verifiers.kinds.code.plan import BYTECODE_MAGIC, build_plan
from verifiers.kinds.code.verifier import harness_source
from verifiers.types import Status

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SECRET = "7f3a9c1e-hidden-expected-value"
ADD = {"test_list": ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(-1, 3) == 2"]}
HIDDEN = {"test_list": [f"assert oracle() == {SECRET!r}"] * 2}
HUMANEVAL_STYLE = {
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n",
    "entry_point": "add",
}


runner = runner_fixture()


# --------------------------------------------------------------------------------------------- scoring


def test_correct_program_scores_one_with_per_test_results(runner: CodeRunner) -> None:
    v = runner.verify("Sure:\n```python\ndef add(a, b):\n    return a + b\n```", ADD)
    assert v.status == Status.OK and v.score == 1.0
    assert statuses(v) == ["passed"] * 3 and v.details["extracted"] == "fenced:python"


def test_partial_credit_weights_and_first_failure_message(runner: CodeRunner) -> None:
    program = "def add(a, b):\n    return abs(a) + b\n"
    v = runner.verify(program, ADD)
    assert v.score == pytest.approx(2 / 3) and statuses(v) == ["passed", "passed", "failed"]
    assert v.details["first_failure"]["index"] == 2 and "got 4, expected 2" in v.details["first_failure"]["message"]
    weighted = runner.verify(program, {**ADD, "weights": [1, 1, 2]})
    assert weighted.score == pytest.approx(0.5)


def test_humaneval_style_check_counts_each_assert(runner: CodeRunner) -> None:
    v = runner.verify("def add(a, b):\n    return 3\n", HUMANEVAL_STYLE)
    assert v.score == 0.5 and statuses(v) == ["passed", "failed"]


def test_stop_on_first_failure_skips_the_rest(runner: CodeRunner) -> None:
    v = runner.verify("def add(a, b):\n    return 0\n", ADD, stop_on_first_failure=True)
    assert statuses(v) == ["failed", "skipped", "skipped"] and v.score == 0.0


def test_a_hanging_test_times_out_and_the_next_one_still_runs(runner: CodeRunner) -> None:
    program = "def add(a, b):\n    while a == 2:\n        pass\n    return a + b\n"
    v = runner.verify(program, {**ADD, "timeout_s": 1})
    assert statuses(v) == ["passed", "timeout", "passed"] and v.score == pytest.approx(2 / 3)


FOUR_ASSERTS = {"test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n"
                        "    assert candidate(3) == 4\n    assert candidate(4) == 5\n", "entry_point": "inc"}


@pytest.mark.parametrize("trouble", ["        while True:\n            pass\n",
                                     "        import os\n        os._exit(1)\n"], ids=["hangs", "crashes"])
def test_humaneval_check_calls_the_restarted_candidate_after_a_timeout_or_crash(runner: CodeRunner,
                                                                               trouble: str) -> None:
    """check(candidate) holds the function under test as its argument: after the restart that the 2nd assert's
    timeout (or crash) forces, the 3rd and 4th call the new process's function, as the test_list form does."""
    program = "def inc(x):\n    if x == 2:\n" + trouble + "    return x + 1\n"
    v = runner.verify(program, {**FOUR_ASSERTS, "timeout_s": 1})
    assert v.score == pytest.approx(0.75), v.details["tests"]
    assert statuses(v) == ["passed", "timeout" if "while" in trouble else "error", "passed", "passed"]


def test_runtime_errors_and_missing_code_are_named(runner: CodeRunner) -> None:
    v = runner.verify("def add(a, b):\n    return a + None\n", ADD)
    assert statuses(v) == ["error"] * 3 and "TypeError" in v.details["tests"][0]["message"]
    syntax = runner.verify("def add(a, b)\n    return a + b\n", ADD)
    assert syntax.score == 0.0 and "SyntaxError" in syntax.details["tests"][0]["message"]
    missing = runner.verify("def plus(a, b):\n    return a + b\n", ADD)
    assert missing.score == 0.0 and "NameError" in missing.details["tests"][0]["message"]
    assert runner.verify("I cannot write this.\n```text\nsorry\n```", ADD).status == Status.NO_ANSWER


def test_invalid_reference_is_not_a_zero(runner: CodeRunner) -> None:
    v = runner.verify("def add(a, b): return a + b", {"test_list": ["assert add(1,"]})
    assert v.status == Status.INVALID_REFERENCE and v.score is None


def test_objects_classes_and_setup_code_work_through_handles(runner: CodeRunner) -> None:
    program = (
        "class Node:\n    def __init__(self, v):\n        self.v, self.left, self.right = v, None, None\n"
        "def height(n):\n    return 0 if n is None else 1 + max(height(n.left), height(n.right))\n"
        "class Counter:\n    def __init__(self):\n        self.n = 0\n"
        "    def inc(self):\n        self.n += 1\n        return self.n\n"
        "def gen(k):\n    yield from range(k)\n"
    )
    reference = {
        "test_setup_code": "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)\n",
        "test_list": [
            "assert height(root) == 3",
            "c = Counter(); c.inc(); assert c.inc() == 2 and c.n == 2",
            "assert list(gen(3)) == [0, 1, 2] and sum(gen(4)) == 6",
            "assert isinstance(height(None), int)",
        ],
    }
    v = runner.verify(program, reference)
    assert v.score == 1.0, v.details["tests"]


def test_stdio_cases_python_and_c(runner: CodeRunner) -> None:
    cases = {"cases": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12"},
                       {"input": "2 2\n", "output": "4\n"}], "compare": "tokens"}
    py = runner.verify("```python\na, b = map(int, input().split())\nprint(a + b if a != 2 else 0)\n```", cases)
    assert statuses(py) == ["passed", "passed", "failed"] and "expected '4'" in py.details["tests"][2]["message"]
    if shutil.which("gcc"):
        c = "```c\n#include <stdio.h>\nint main(){int a,b;scanf(\"%d %d\",&a,&b);printf(\"%d\\n\",a+b);}\n```"
        assert runner.verify(c, {**cases, "language": "c"}).score == 1.0
        broken = runner.verify("```c\nint main({\n```", {**cases, "language": "c"})
        assert broken.score == 0.0 and "compile error" in broken.details["tests"][0]["message"]


def test_stdio_float_tolerance_and_timeouts(runner: CodeRunner) -> None:
    ref = {"cases": [{"input": "3", "output": "0.333333"}, {"input": "0", "output": "0"}], "compare": "float",
           "tolerance": 1e-4, "timeout_s": 1}
    v = runner.verify("n = int(input())\nwhile n == 0:\n    pass\nprint(1 / n)\n", ref)
    assert statuses(v) == ["passed", "timeout"]


def test_stdio_cases_share_sandbox_starts(runner: CodeRunner) -> None:
    """60 cases cost a few sandbox runs (batches of run_cases), not 60; every case is still judged on its own."""
    ref = {"cases": [{"input": f"{i}\n", "output": f"{i * i}\n"} for i in range(60)]}
    before = runner.backend.stats["runs"]
    v = runner.verify("n = int(input())\nprint(n * n if n != 7 else -1)\n", ref)
    assert v.details["passed"] == 59 and statuses(v)[7] == "failed"
    assert "expected '49'" in v.details["tests"][7]["message"]
    assert runner.backend.stats["runs"] - before <= 6


def test_many_completions_in_one_batch(runner: CodeRunner) -> None:
    good, bad = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a * b\n"
    verdicts = runner.many([(good if i % 2 == 0 else bad, ADD) for i in range(24)])
    assert [v.score for v in verdicts] == [1.0 if i % 2 == 0 else pytest.approx(1 / 3) for i in range(24)]


# ---------------------------------------------------------------------------------------------- attacks

EXIT_ATTACKS = {
    "sys.exit at import": "import sys\nsys.exit(0)\n",
    "os._exit at import": "import os\nos._exit(0)\n",
    "raise SystemExit in the function": "def add(a, b):\n    raise SystemExit(0)\n",
    "os._exit in the function": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "exit() builtin": "def add(a, b):\n    exit()\n",
    "atexit + exit": "import atexit, os\natexit.register(lambda: os._exit(0))\ndef add(a, b):\n    raise SystemExit\n",
}


@pytest.mark.parametrize("program", EXIT_ATTACKS.values(), ids=EXIT_ATTACKS.keys())
def test_exiting_early_passes_nothing(runner: CodeRunner, program: str) -> None:
    for reference in (ADD, HUMANEVAL_STYLE):
        v = runner.verify(program, reference)
        assert v.status == Status.OK and v.score == 0.0 and "passed" not in statuses(v)


EQ_ATTACKS = {
    "always-equal object": "class A:\n    def __eq__(self, o): return True\n    __ne__ = lambda s, o: False\n"
                           "def add(a, b): return A()\ndef oracle(): return A()\n",
    "always-equal list subclass": "class L(list):\n    def __eq__(self, o): return True\n"
                                  "def add(a, b): return L()\ndef oracle(): return L()\n",
    "always-equal int subclass": "class I(int):\n    def __eq__(self, o): return True\n"
                                 "def add(a, b): return I(0)\ndef oracle(): return I(0)\n",
    "always-equal str subclass": "class S(str):\n    def __eq__(self, o): return True\n"
                                 "def add(a, b): return S('x')\ndef oracle(): return S('x')\n",
}


@pytest.mark.parametrize("program", EQ_ATTACKS.values(), ids=EQ_ATTACKS.keys())
def test_objects_that_equal_everything_do_not_pass(runner: CodeRunner, program: str) -> None:
    for reference in (ADD, HUMANEVAL_STYLE, HIDDEN):
        assert runner.verify(program, reference).score == 0.0


PATCH_ATTACKS = {
    "builtins patched": (
        "import builtins\nbuiltins.isinstance = lambda *a: True\n"
        "builtins.AssertionError = type('E', (BaseException,), {})\n"
        "builtins.print = lambda *a, **k: None\nbuiltins.len = lambda x: 0\n__builtins__ = {}\n"
        "def add(a, b): return 0\ndef oracle(): return 0\n"
    ),
    "frame walking": (
        "import sys, gc\n"
        "def add(a, b):\n"
        "    f = sys._getframe(1)\n"
        "    while f is not None:\n"
        "        f.f_globals['__eq__check'] = lambda x, y: True\n"
        "        f = f.f_back\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and '__unit__' in o: o['__eq__check'] = lambda x, y: True\n"
        "    return 0\n"
        "oracle = add\n"
    ),
    "trace function jumping over asserts": (
        "import sys\n"
        "def tracer(frame, event, arg):\n"
        "    if event == 'line' and frame.f_code.co_filename == '<tests>':\n"
        "        frame.f_lineno = frame.f_lineno + 1\n"
        "    return tracer\n"
        "sys.settrace(tracer)\n"
        "def add(a, b):\n    sys.settrace(tracer)\n    return 0\n"
        "oracle = add\n"
    ),
}


@pytest.mark.parametrize("program", PATCH_ATTACKS.values(), ids=PATCH_ATTACKS.keys())
def test_patching_the_interpreter_only_hurts_the_candidate(runner: CodeRunner, program: str) -> None:
    for reference in (ADD, HUMANEVAL_STYLE, HIDDEN):
        assert runner.verify(program, reference).score == 0.0


FORGE_ATTACKS = {
    "print fake verdict lines": (
        "import sys, json\n"
        "for i in range(3):\n"
        "    line = json.dumps({'i': i, 's': 'passed', 'm': ''})\n"
        "    print(line); print('x ' + line); sys.stderr.write(line + '\\n')\n"
        "print(json.dumps({'done': True}))\n"
        "def add(a, b): return 0\n"
    ),
    "write to every reachable stdout": (
        "import os, json, glob\n"
        "def add(a, b):\n"
        "    for path in glob.glob('/proc/*/fd/1') + ['/dev/stdout', '/proc/self/fd/1']:\n"
        "        try:\n"
        "            fd = os.open(path, os.O_WRONLY)\n"
        "            for i in range(3):\n"
        "                os.write(fd, (json.dumps({'i': i, 's': 'passed', 'm': ''}) + '\\n').encode())\n"
        "            os.close(fd)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n"
    ),
}


@pytest.mark.parametrize("program", FORGE_ATTACKS.values(), ids=FORGE_ATTACKS.keys())
def test_forged_verdict_lines_are_ignored(runner: CodeRunner, program: str) -> None:
    v = runner.verify(program, ADD)
    assert v.score == 0.0 and "passed" not in statuses(v)


def test_the_tests_cannot_be_read_by_the_candidate(runner: CodeRunner) -> None:
    """The expected value lives only in the judge: look everywhere a process of the same user can."""
    program = (
        "import os, glob, gc, sys\n"
        f"MARK = {SECRET[:8][::-1]!r}[::-1]  # never spelled out in this source file\n"
        "def _search(data):\n"
        "    at = data.find(MARK.encode())\n"
        "    return None if at < 0 else data[at:at + 30].decode('latin-1')\n"
        "def oracle():\n"
        "    paths = glob.glob('/proc/*/mem') + glob.glob('/proc/*/fd/*') + glob.glob('/proc/*/environ')\n"
        "    paths += glob.glob('/proc/*/cmdline') + glob.glob('/work/**', recursive=True)"
        " + glob.glob('/tmp/**', recursive=True)\n"
        "    own = (f'/proc/{os.getpid()}/', '/proc/self/', '/proc/thread-self/')  # our own memory holds MARK itself\n"
        "    for path in paths:\n"
        "        if path.startswith(own): continue\n"
        "        try:\n"
        "            with open(path, 'rb') as f:\n"
        "                if path.endswith('/mem'):\n"
        "                    for line in open(path.replace('mem', 'maps')):\n"
        "                        lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
        "                        try:\n"
        "                            f.seek(lo); found = _search(f.read(hi - lo))\n"
        "                        except (OSError, ValueError, OverflowError):\n"
        "                            continue\n"
        "                        if found: return found\n"
        "                    continue\n"
        "                found = _search(f.read(1 << 22))\n"
        "            if found: return found\n"
        "        except OSError:\n"
        "            continue\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, str) and MARK in o and o != MARK: return o\n"
        "    return 'not found'\n"
    )
    assert_hidden_value_not_found(runner, program)


def assert_hidden_value_not_found(runner: CodeRunner, program: str) -> None:
    v = runner.verify(program, HIDDEN)
    assert v.score == 0.0, v.details["tests"]
    assert "not found" in v.details["tests"][0]["message"], v.details["tests"]  # it really ran and found nothing


def test_the_candidates_own_memory_holds_no_copy_of_the_tests(runner: CodeRunner) -> None:
    """The first candidate is forked from the judge, not exec'ed: the fork happens before the judge reads its stdin,
    and the sandbox moves stdin into a memfd without it passing through the interpreter, so no freed buffer of the
    job lingers in the copied memory. Scan every readable byte of our own process for the secret."""
    program = (
        "import os, re\n"
        f"MARK = {SECRET[:8][::-1]!r}[::-1].encode()  # the secret starts with MARK and goes on with '-'\n"
        "def oracle():\n"
        "    import ctypes\n"
        "    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable again (inherited off), so /proc/self/mem opens\n"
        "    hits, fd = 0, os.open('/proc/self/mem', os.O_RDONLY)\n"
        "    for region in open('/proc/self/maps'):\n"
        "        lo, hi = (int(x, 16) for x in region.split()[0].split('-'))\n"
        "        try:\n"
        "            data = os.pread(fd, hi - lo, lo)\n"
        "        except (OSError, OverflowError):  # [vvar], [vsyscall], regions without 'r'\n"
        "            data = b''\n"
        "        for m in re.finditer(re.escape(MARK) + b'(.)', data, re.S):\n"
        "            if m.group(1) == b'-':\n"
        "                return data[m.start():m.start() + 30].decode('latin-1')\n"
        "            hits += 1\n"
        "    return f'not found ({hits} copies of the prefix we built ourselves)'\n"
    )
    assert_hidden_value_not_found(runner, program)


KILL_ATTACKS = {
    "kill the parent": "import os, signal\ndef add(a, b):\n"
                       "    os.kill(os.getppid(), signal.SIGKILL)\n    return a + b\n",
    "kill -9 -1": "import os\ndef add(a, b):\n    os.system('kill -9 -1')\n    return a + b\n",
    "kill every pid": "import os, signal\ndef add(a, b):\n    for pid in range(1, 5000):\n"
                      "        try: os.kill(pid, signal.SIGKILL)\n"
                      "        except OSError: pass\n    return a + b\n",
    "ptrace the parent": (
        "import ctypes, os\ndef add(a, b):\n    libc = ctypes.CDLL(None)\n"
        "    assert libc.ptrace(16, os.getppid(), 0, 0) != 0  # PTRACE_ATTACH must be refused\n    os._exit(0)\n"
    ),
}


@pytest.mark.parametrize("program", KILL_ATTACKS.values(), ids=KILL_ATTACKS.keys())
def test_killing_or_tracing_the_harness_passes_nothing(runner: CodeRunner, program: str) -> None:
    v = runner.verify(program, ADD)
    assert v.status == Status.OK and v.score == 0.0, v.details.get("tests")


def test_stdio_expected_output_never_enters_the_sandbox(runner: CodeRunner) -> None:
    program = (
        "import glob\nfound = 'nothing'\n"
        "for p in glob.glob('/work/**', recursive=True) + glob.glob('/proc/*/fd/*') + glob.glob('/proc/*/environ'):\n"
        "    try:\n        data = open(p, 'rb').read(1 << 20)\n    except OSError:\n        continue\n"
        f"    if {SECRET[:8][::-1]!r}[::-1].encode() in data:\n        found = data.decode('latin-1')\n"
        "print(found)\n"
    )
    v = runner.verify(program, {"cases": [{"input": "x", "output": SECRET}]})
    assert v.score == 0.0 and "nothing" in v.details["tests"][0]["message"]


# Names the tests take from outside the program: Python's builtins and modules, and the reference prompt's helpers
# (found by running the code-harness probe audit on HumanEval: /32 and /38 scored 1.0 before the judge kept them).
PROMPTED = {
    "prompt": "import math\n\n\ndef encode(s: str) -> str:\n    return s[::-1] + 'x'\n\n\ndef decode(s: str) -> str:\n"
              "    \"\"\"Inverse of encode.\"\"\"\n",
    "test": "import math\n\n\ndef check(candidate):\n    for word in ['ab', 'xyz']:\n"
            "        assert candidate(encode(word)) == word\n    assert math.isclose(len(candidate(encode('q'))), 1)\n",
    "entry_point": "decode",
}
LOOPED = {
    "test": "def check(candidate):\n    for n in range(5):\n        assert candidate(n) == n * n\n"
            "    assert abs(candidate(1.5) - 2.25) < 1e-9\n    assert sorted(candidate(-2) for _ in range(1)) == [4]\n",
    "entry_point": "square",
}
SHADOW_ATTACKS = {
    "prompt helper redefined": (PROMPTED, "def encode(s):\n    return s\ndef decode(s):\n    return s\n"),
    "prompt helper redefined, module faked": (
        PROMPTED, "class math:\n    isclose = staticmethod(lambda *a, **k: True)\n"
                  "def encode(s):\n    return s\ndef decode(s):\n    return s\n"),
    "builtins shadowed": (LOOPED, "range = lambda *a: []\nabs = lambda x: 0\nsorted = lambda *a, **k: [4]\n"
                                  "def square(x):\n    return None\n"),
    "builtin shadowed in asserts": ({"test_list": ["assert len(f(3)) == 3", "assert set(f(2)) == set([0, 1])"]},
                                    "def len(x):\n    return 3\ndef set(*a):\n    return 1\n"
                                    "def f(n):\n    return None\n"),
    "module replaced in sys.modules": (
        PROMPTED, "import sys, types\nm = types.ModuleType('math')\nm.isclose = lambda *a, **k: True\n"
                  "sys.modules['math'] = m\nmath = m\ndef decode(s):\n    return s\n"),
}


@pytest.mark.parametrize("reference,program", SHADOW_ATTACKS.values(), ids=SHADOW_ATTACKS.keys())
def test_redefining_names_the_tests_use_passes_nothing(runner: CodeRunner, reference: dict, program: str) -> None:
    v = runner.verify(program, reference)
    assert v.status == Status.OK and v.score == 0.0, v.details["tests"]


def test_the_tests_still_see_the_programs_own_names(runner: CodeRunner) -> None:
    """The other side of the rule: honest programs keep working, including a function under test named like a
    builtin (MBPP 126 ``sum``) and modules the program imported for the tests."""
    honest = "def decode(s):\n    return s[:-1][::-1]\n"
    assert runner.verify(honest, PROMPTED).score == 1.0
    assert runner.verify("def square(x):\n    return x * x\n", LOOPED).score == 1.0
    named_sum = {"test_list": ["assert sum(10, 15) == 6", "assert sum(100, 150) == 93"]}
    program = ("import math\ndef sum(a, b):\n    s = 0\n    for i in range(1, min(a, b)):\n"
               "        if a % i == 0 and b % i == 0:\n            s += i\n    return s\n")
    assert runner.verify(program, named_sum).score == 1.0
    uses_module = {"test_list": ["assert math.isclose(area(2), 4 * math.pi)"]}
    assert runner.verify("import math\ndef area(r):\n    return math.pi * r * r\n", uses_module).score == 1.0


SERVES_ITSELF = '''import socket, threading

def echo_over_loopback(text):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    def answer():
        conn, _ = server.accept()
        conn.sendall(conn.recv(64))
        conn.close()
    threading.Thread(target=answer).start()
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(text.encode())
        return client.recv(64).decode()
'''


def test_programs_have_no_network_unless_the_item_asks_for_a_loopback(runner: CodeRunner) -> None:
    """By default a program may open unix sockets only (its runs skip a network namespace); ``network: loopback``
    gives it 127.0.0.1 of its own, for tests of a server the program starts."""
    reference = {"test_list": ["assert echo_over_loopback('ping') == 'ping'"]}
    offline = runner.verify(SERVES_ITSELF, reference)
    assert offline.score == 0.0 and "Address family not supported" in offline.details["tests"][0]["message"], \
        offline.details
    online = runner.verify(SERVES_ITSELF, reference, network="loopback")
    assert online.score == 1.0, online.details


@pytest.mark.parametrize("magic_matches", [True, False])
def test_the_judge_runs_the_hosts_bytecode_only_where_its_interpreter_reads_it(runner: CodeRunner,
                                                                               magic_matches: bool) -> None:
    """The job carries the tests twice, as text and as the host's bytecode; here the two disagree, which shows
    which one the judge ran: the bytecode under the host's magic, the text under any other."""
    text = build_plan({"test_list": ["assert f() == 1"]})
    bytecode = build_plan({"test_list": ["assert f() == 2"]})
    job = {"nonce": "n" * 32, "program": "def f():\n    return 2\n", "tests": text.judge_code, "setup": "",
           "tests_bytecode": bytecode.tests_bytecode.hex(), "setup_bytecode": "",
           "bytecode_magic": BYTECODE_MAGIC if magic_matches else "0d0d0d0d", "subjects": text.subjects,
           "timeouts": [5.0], "stop_on_first_failure": False}
    request = RunRequest(code=harness_source(), language="python", stdin=json.dumps(job), args=text.preload,
                         precompiled=True, limits=Limits(wall_s=20, cpu_s=20), network="none")
    result = runner.loop.run_until_complete(runner.backend.run(request))
    verdicts = [json.loads(line.split(" ", 1)[1]) for line in result.stdout.splitlines() if line.startswith("n" * 32)]
    assert [v["s"] for v in verdicts if "s" in v] == (["passed"] if magic_matches else ["failed"]), result
