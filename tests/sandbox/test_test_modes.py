"""SandboxFusion's test modes (pytest, junit, jest, go_test; Rust's libtest and Kotlin scripts beside them) and the
libraries programs and test suites import (numpy, pandas, scipy, sympy, requests; javatuples, lodash, luaunit,
Test::Deep, rackunit, testify; Rust's rand, regex, md5), each inside the sandbox: a passing suite exits 0, a failing
one does not."""
from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from sandbox.api import RunStatus
from tests.support.language_cases import Runner, explain

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture(scope="module")
def sb() -> Iterator[Runner]:
    with Runner() as runner:
        yield runner


MODES = {
    "pytest": ("import numpy as np\n\ndef test_sum():\n    assert int(np.arange(4).sum()) == {}\n", "6", "7"),
    "junit": ("import org.junit.Test;\nimport static org.junit.Assert.*;\n"
              "public class MainTest {{ @Test public void adds() {{ assertEquals({}, 3 + 3); }} }}\n", "6", "7"),
    "go_test": ("package main\nimport (\n  \"testing\"\n  \"github.com/stretchr/testify/assert\"\n)\n"
                "func TestAdd(t *testing.T) {{ assert.Equal(t, {}, 3+3) }}\n", "6", "7"),
    "rust_test": ("#[cfg(test)]\nmod tests {{\n  #[test]\n  fn adds() {{ assert_eq!(3 + 3, {}); }}\n}}\n", "6", "7"),
    "kotlin_script": ("val x = 3 + 3\nassert(x == {}) {{ \"no\" }}\nprintln(\"ok\")\n", "6", "7"),
    "jest": ("import _ from 'lodash';\nconst add = (a: number, b: number): number => a + b;\n"
             "describe('add', () => {{ test('adds', () => {{ expect(_.sum([add(1, 2), 3])).toBe({}); }}); }});\n",
             "6", "7"),
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_mode_passes_and_fails(sb: Runner, mode: str) -> None:
    template, right, wrong = MODES[mode]
    good = sb.run(template.format(right), mode)
    assert good.status == RunStatus.OK, explain(good)
    bad = sb.run(template.format(wrong), mode)
    assert bad.status == RunStatus.RUNTIME_ERROR, explain(bad)


JEST_SUITE = """import { strict as assert } from 'node:assert';
import { double } from './lib';
interface Pair { a: number; b: number }
const sum = ({ a, b }: Pair): number => a + b;
describe('sum', () => {
  test('adds', () => { expect(sum({ a: 2, b: 2 })).toBe(4); });
  it.each([[1, 2], [3, 6]])('doubles %i', (x, y) => { expect(double(x)).toEqual(y); });
  test('resolves', async () => { await expect(Promise.resolve(sum({ a: 1, b: 1 }))).resolves.toBe(2); });
  test('node assert', () => { assert.deepEqual([sum({ a: 1, b: 0 })], [2]); });
  test.skip('skipped', () => { throw new Error('never'); });
});
"""


def _jest_report(stdout: str) -> dict[str, str]:
    report = json.loads(stdout.rstrip("\n").rsplit("\n", 1)[-1])
    return {t["fullName"]: t["status"] for suite in report["testResults"] for t in suite["assertionResults"]}


def test_jest_reports_each_test_and_imports_the_runs_files(sb: Runner) -> None:
    """A TypeScript suite (types stripped by Babel) importing a module uploaded beside it: jest's JSON report is
    the last line of stdout, with each test's own result; one failed test fails the run."""
    lib = {"lib.js": "exports.double = (x) => 2 * x;\n"}
    r = sb.run(JEST_SUITE, "jest", files=lib)
    assert r.status == RunStatus.RUNTIME_ERROR and r.exit_code == 1, explain(r)
    assert _jest_report(r.stdout) == {"sum adds": "passed", "sum doubles 1": "passed", "sum doubles 3": "passed",
                                      "sum resolves": "passed", "sum node assert": "failed",
                                      "sum skipped": "pending"}, explain(r)
    assert "Tests:       1 failed, 1 skipped, 4 passed, 6 total" in r.stderr, explain(r)
    fixed = sb.run(JEST_SUITE.replace("[2]", "[1]"), "jest", files=lib)
    assert fixed.status == RunStatus.OK, explain(fixed)
    assert set(_jest_report(fixed.stdout).values()) == {"passed", "pending"}, explain(fixed)


@pytest.mark.parametrize("code, expected, said", [
    ("test('x', () => { expect(1).toBe(1); );\n", RunStatus.RUNTIME_ERROR, "SyntaxError"),
    ("const x: number = 1;\n", RunStatus.RUNTIME_ERROR, "Your test suite must contain at least one test"),
    ("process.exit(0);\ntest('x', () => { expect(1).toBe(2); });\n", RunStatus.RUNTIME_ERROR,
     "before the tests finished"),
    ("test('x', () => { expect(1).toBe(1); process.exit(0); });\n", RunStatus.RUNTIME_ERROR,
     "before the tests finished"),
    ("test('spins', () => { for (;;) {} });\n", RunStatus.TIMEOUT, ""),
    ("test('grows', () => { const a = []; for (;;) a.push(new Array(1e6).fill(1.5)); });\n",
     RunStatus.MEMORY_EXCEEDED, ""),
])
def test_jest_failures_have_their_names(sb: Runner, code: str, expected: RunStatus, said: str) -> None:
    """A suite that cannot run, a file with no test, a program ending the process before jest has its results (it
    would otherwise exit 0 with its tests unrun), a test that never ends and one that allocates without bound."""
    r = sb.run(code, "jest", cpu_s=8, wall_s=20, memory_mb=384)
    assert r.status == expected, explain(r)
    assert said in r.stderr, explain(r)


def test_jest_does_not_wait_for_what_a_test_left_running(sb: Runner) -> None:
    """A server and a timer left behind by a passing test: the run ends when jest's report is out, as with
    --forceExit, not at the wall clock."""
    code = ("import * as http from 'node:http';\n"
            "test('serves', async () => { const s = http.createServer(); await new Promise<void>(r => s.listen(0, r));"
            " setTimeout(() => {}, 1e9); expect(1).toBe(1); });\n")
    r = sb.run(code, "jest", wall_s=20)
    assert r.status == RunStatus.OK and r.wall_ms < 10_000, explain(r)


LIBRARIES = {
    "python": ("import numpy, pandas, scipy.linalg, sympy, requests\n"
               "print(int(pandas.DataFrame({'a': [1, 2, 3]})['a'].sum()), sympy.factorint(12)[2],"
               " round(float(scipy.linalg.det(numpy.eye(2)))))", "6 2 1"),
    "java": ("import org.javatuples.Pair;\npublic class Main { public static void main(String[] a){"
             " System.out.println(Pair.with(6, 2).getValue0()); } }", "6"),
    "javascript": ("const _ = require('lodash'); console.log(_.sum([1, 2, 3]));", "6"),
    "lua": ("local lu = require('luaunit')\nlu.assertEquals(3 + 3, 6)\nprint(6)", "6"),
    "perl": ("use Test::Deep;\nprint eq_deeply([1, [2]], [1, [2]]) ? \"6\\n\" : \"no\\n\";", "6"),
    "racket": ("#lang racket\n(require rackunit)\n(check-equal? (+ 3 3) 6)\n(displayln 6)", "6"),
    "rust": ("use rand::Rng;\nuse regex::Regex;\nuse md5;\nfn main() {\n"
             "    let x: u32 = rand::thread_rng().gen_range(6..7);\n"
             "    let re = Regex::new(r\"^(\\d+)-(\\d+)$\").unwrap();\n"
             "    println!(\"{} {} {:x}\", x, &re.captures(\"2-6\").unwrap()[2], md5::compute(b\"abc\"));\n}\n",
             "6 6 900150983cd24fb0d6963f7d28e17f72"),
    "ruby": ("require 'test/unit/assertions'\ninclude Test::Unit::Assertions\nassert_equal(6, 3 + 3)\nputs 6", "6"),
}


@pytest.mark.parametrize("language", sorted(LIBRARIES))
def test_preinstalled_libraries_import(sb: Runner, language: str) -> None:
    code, expected = LIBRARIES[language]
    r = sb.run(code, language)
    assert r.status == RunStatus.OK, explain(r)
    assert r.stdout.split() == expected.split(), explain(r)


def test_requests_reaches_a_server_on_the_runs_loopback(sb: Runner) -> None:
    code = ("import http.server, threading, requests\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n        self.send_response(200); self.end_headers(); self.wfile.write(b'pong')\n"
            "    def log_message(self, *a): pass\n"
            "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
            "threading.Thread(target=s.serve_forever, daemon=True).start()\n"
            "print(requests.get(f'http://127.0.0.1:{s.server_port}/', timeout=5).text)\n")
    r = sb.run(code, "python")
    assert r.status == RunStatus.OK and r.stdout.strip() == "pong", explain(r)
