"""SandboxFusion's request shapes beyond verl's: timeouts over the cap clamped and said (LiveCodeBench's client sends
run_timeout=103), absolute work-dir paths in files and fetch_files, GET /v1/ping, every SandboxFusion language this
host runs, and POST /run_jupyter in SandboxFusion's answer shape."""
from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import LiveServer

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def post(server: LiveServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with server.client(timeout=180) as c:
        r = c.post(path, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_ping_answers_pong(server: LiveServer) -> None:
    with server.client() as c:
        r = c.get("/v1/ping")
    assert (r.status_code, r.json()) == (200, "pong")


def test_languages_route_lists_each_with_its_version(server: LiveServer) -> None:
    wanted = ("go", "typescript", "csharp", "php", "lua", "r", "perl", "ruby", "scala", "racket", "kotlin", "d",
              "verilog", "haskell", "ocaml", "elixir", "fortran", "go_test", "pytest", "junit", "jest")
    deadline = time.monotonic() + 60  # versions are probed off the event loop as the server starts
    while True:
        with server.client() as c:
            langs = c.get("/v1/sandbox/languages").json()
        if all(langs[name]["version"] for name in wanted) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for name in wanted:
        assert langs[name]["available"] and langs[name]["version"] and langs[name]["assertions"], (name, langs[name])
    assert "go1." in langs["go"]["version"] and "Mono" in langs["csharp"]["version"]


def test_timeouts_over_the_cap_are_clamped_and_reported(server: LiveServer) -> None:
    r = post(server, "/run_code", {"code": "print(7)", "language": "python", "run_timeout": 103,
                                   "compile_timeout": 10_000})
    assert r["status"] == "Success" and r["run_result"]["stdout"] == "7\n"
    assert "run_timeout=103 was clamped" in r["message"] and "compile_timeout=10000 was clamped" in r["message"]
    r = post(server, "/run_code", {"code": "while True: pass", "language": "python", "run_timeout": 1})
    assert r["status"] == "Failed" and r["run_result"]["status"] == "TimeLimitExceeded"


def test_absolute_paths_inside_the_work_dir(server: LiveServer) -> None:
    r = post(server, "/run_code", {
        "code": "import os\nprint(open('/work/in/a.txt').read(), os.getcwd())\nopen('out.txt', 'w').write('done')",
        "language": "python", "files": {"/work/in/a.txt": base64.b64encode(b"hi").decode()},
        "fetch_files": ["/work/out.txt"]})
    assert r["status"] == "Success" and r["run_result"]["stdout"] == "hi /work\n"
    assert r["files"] == {"/work/out.txt": base64.b64encode(b"done").decode()}
    with server.client() as c:
        bad = c.post("/run_code", json={"code": "print(1)", "language": "python", "fetch_files": ["/etc/passwd"]})
    assert bad.status_code == 422


# SandboxFusion's language names for the languages added here, each with a program that prints 6.
SANDBOXFUSION_PROGRAMS = {
    "go_test": "package main\nimport \"testing\"\nfunc TestSix(t *testing.T) { if 3+3 != 6 { t.Fatal() } }\n",
    "php": "<?php echo 3 + 3;", "typescript": "const x: number = 3 + 3; console.log(x);",
    "csharp": "class P { static void Main() { System.Console.WriteLine(3 + 3); } }", "lua": "print(3 + 3)",
    "R": "cat(3 + 3)", "perl": "print 3 + 3;", "ruby": "puts 3 + 3", "racket": "#lang racket\n(displayln (+ 3 3))",
    "D_ut": "import std.stdio;\nunittest { assert(3 + 3 == 6); }\nvoid main() { writeln(3 + 3); }",
    "scala": "object Main { def main(a: Array[String]): Unit = println(3 + 3) }",
    "verilog": "module main; initial begin $display(\"%0d\", 3 + 3); $finish; end endmodule",
    "pytest": "def test_six():\n    assert 3 + 3 == 6\n",
    "jest": "test('six', () => { expect(3 + 3).toBe(6); });\n",
}


@pytest.mark.parametrize("language", sorted(SANDBOXFUSION_PROGRAMS))
def test_sandboxfusion_language_names_run(server: LiveServer, language: str) -> None:
    r = post(server, "/run_code", {"code": SANDBOXFUSION_PROGRAMS[language], "language": language,
                                   "run_timeout": 30, "compile_timeout": 60})
    assert r["status"] == "Success", r
    if language not in ("go_test", "pytest", "jest"):
        assert r["run_result"]["stdout"].strip() == "6", r


# SandboxFusion's jest runner writes the code to a `.test.ts` file and runs jest through Babel in the work dir:
# TypeScript (types stripped), ES modules, jest's globals imported from @jest/globals, lodash from its node_modules.
JEST_PROGRAM = """import { describe, expect, test } from '@jest/globals';
import _ from 'lodash';

export function chunkSums(values: number[], size: number): number[] {
  return _.chunk(values, size).map((chunk: number[]) => _.sum(chunk));
}

describe('chunkSums', () => {
  test('sums each chunk', () => {
    expect(chunkSums([1, 2, 3, 4, 5], 2)).toEqual([3, 7, 5]);
  });
  test('empty input', () => {
    expect(chunkSums([], 3)).toEqual([]);
  });
});
"""


def test_sandboxfusion_jest_request(server: LiveServer) -> None:
    """A passing suite is Success with no compile step (as SandboxFusion's jest has none); a failing test is Failed
    with jest's exit code 1 and its report on stderr."""
    r = post(server, "/run_code", {"code": JEST_PROGRAM, "language": "jest", "run_timeout": 20})
    assert r["status"] == "Success" and r["compile_result"] is None, r
    assert "Tests:       2 passed, 2 total" in r["run_result"]["stderr"], r
    r = post(server, "/run_code", {"code": JEST_PROGRAM.replace("[3, 7, 5]", "[3, 7, 6]"), "language": "jest",
                                   "run_timeout": 20})
    assert r["status"] == "Failed" and r["run_result"]["status"] == "Finished", r
    assert r["run_result"]["return_code"] == 1 and "1 failed, 1 passed" in r["run_result"]["stderr"], r


def test_assertion_failure_fails_run_code(server: LiveServer) -> None:
    java = "public class Main { public static void main(String[] a) { assert 1 == 2; } }"
    r = post(server, "/run_code", {"code": java, "language": "java", "run_timeout": 30})
    assert r["status"] == "Failed" and "AssertionError" in r["run_result"]["stderr"]


def test_run_jupyter_cells_share_one_interpreter(server: LiveServer) -> None:
    cells = ["a = 123", "a", "print(a)", "import sys; sys.stderr.write('to stderr')",
             "raise RuntimeError('error message')", "a + 1"]
    r = post(server, "/run_jupyter", {"cells": cells, "files": {"d.txt": base64.b64encode(b"x").decode()},
                                      "fetch_files": ["d.txt"]})
    assert set(r) == {"status", "message", "driver", "cells", "executor_pod_name", "files"}
    assert r["status"] == "Success" and r["driver"]["status"] == "Finished"
    out = r["cells"]
    assert len(out) == 6 and all(set(c) == {"stdout", "stderr", "display", "error"} for c in out)
    assert out[0] == {"stdout": "", "stderr": "", "display": [], "error": []}
    assert out[1]["display"] == [{"text/plain": "123"}]
    assert out[2]["stdout"] == "123\n"
    assert out[3]["stderr"] == "to stderr"
    assert out[4]["error"][0]["ename"] == "RuntimeError" and out[4]["error"][0]["evalue"] == "error message"
    assert out[5]["display"] == [{"text/plain": "124"}]  # a failing cell does not stop the next
    assert r["files"] == {"d.txt": base64.b64encode(b"x").decode()}


def test_run_jupyter_timeouts(server: LiveServer) -> None:
    r = post(server, "/run_jupyter", {"cells": ["import time; time.sleep(5)", "1 + 1"], "cell_timeout": 0.5})
    assert r["status"] == "Success"
    assert r["cells"][0]["error"][0]["ename"] == "CellTimeout" and r["cells"][1]["display"] == [{"text/plain": "2"}]
    r = post(server, "/run_jupyter", {"cells": ["while True: pass"], "total_timeout": 1})
    assert r["status"] == "Failed" and r["driver"]["status"] == "TimeLimitExceeded" and r["cells"] == []


def _python_sessions(server: LiveServer) -> tuple[float, float]:
    """(created, open) python environment sessions, as /metrics counts them."""
    with server.client() as c:
        text = c.get("/metrics").text
    found = dict(re.findall(r'^(reward_env_sessions_(?:total|open))\{env="python"\} (\S+)$', text, re.M))
    return float(found.get("reward_env_sessions_total", 0)), float(found.get("reward_env_sessions_open", 0))


def test_run_jupyter_fetches_what_the_cells_wrote_and_names_an_ended_interpreter(server: LiveServer) -> None:
    """Each request is a python environment session, counted as one and closed with it."""
    created, open_now = _python_sessions(server)
    big = "é" * 300_000 + "end"  # 600 KB: fetched in three chunks
    cells = ["open('out.txt', 'w').write('héllo')", "import os", "os.mkfifo('p')", "open('e', 'w').close()",
             "open('big.txt', 'w').write('é' * 300_000 + 'end')", "open('huge.txt', 'w').write('x' * (1 << 21))",
             "open('bad.txt', 'wb').write(b'a\\xffb')"]
    r = post(server, "/run_jupyter", {"cells": cells, "fetch_files": ["/work/out.txt", "p", "missing.txt", "e",
                                                                      "big.txt", "huge.txt", "bad.txt"]})
    assert r["status"] == "Success", r
    # a FIFO (reading it would block), a missing file and one over a fetched file's 1 MiB are left out; invalid
    # UTF-8 comes back replaced, as /run_code returns it
    assert r["files"] == {name: base64.b64encode(text.encode()).decode() for name, text in (
        ("/work/out.txt", "héllo"), ("e", ""), ("big.txt", big), ("bad.txt", "a\ufffdb"))}, r["message"]
    assert "huge.txt was not fetched: its 2097152 bytes are over a fetched file's limit" in r["message"], r
    with server.client() as c:  # a cell is an action of the python environment, within its size limit
        over = c.post("/run_jupyter", json={"cells": ["1", "x = 1  #" + "x" * 200_000]})
    assert over.status_code == 422 and over.json()["loc"] == ["cells", 1], over.text
    # a cell that ends the interpreter: the request is Failed, the cell says why, the later cells did not run
    r = post(server, "/run_jupyter", {"cells": ["x = 1", "import os; os._exit(3)", "x"]})
    assert r["status"] == "Failed" and r["driver"]["status"] == "Finished", r
    assert r["cells"][0]["error"] == [] and r["cells"][1]["error"][0]["ename"] == "exited", r
    assert r["cells"][2]["error"][0]["ename"] == "NotRun" and r["cells"][2]["display"] == [], r
    assert _python_sessions(server) == (created + 2, open_now)


def _processes_named(comm: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if pid.isdigit() and Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                found.append(int(pid))
    return found


def test_run_jupyter_closes_its_session_when_the_client_goes_away(server: LiveServer) -> None:
    """The cells run in a python session of their own: its interpreter names itself, the client gives up while the
    cell sleeps (it would for 50 s), and the session, its interpreter with it, is gone within seconds."""
    comm = f"jpy{secrets.token_hex(5)}"
    cells = ["x = 1", f"import ctypes, time\nassert ctypes.CDLL(None).prctl(15, {comm.encode()!r}, 0, 0, 0) == 0\n"
             "time.sleep(50)"]
    with server.client(timeout=2) as c, contextlib.suppress(httpx.TimeoutException):
        c.post("/run_jupyter", json={"cells": cells, "total_timeout": 55})
        pytest.fail("the request should still be running")
    assert _processes_named(comm), "the session's interpreter is not running the cell"
    deadline = time.monotonic() + 10
    while _processes_named(comm) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_named(comm), "the session outlived its client"
