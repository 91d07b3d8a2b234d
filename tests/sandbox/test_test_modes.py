"""SandboxFusion's test modes (pytest, junit, go_test; Rust's libtest and Kotlin scripts beside them) and the
libraries programs and test suites import (numpy, pandas, scipy, sympy, requests; javatuples, lodash, luaunit,
Test::Deep, rackunit, testify), each inside the sandbox: a passing suite exits 0, a failing one does not."""
from __future__ import annotations

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
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_mode_passes_and_fails(sb: Runner, mode: str) -> None:
    template, right, wrong = MODES[mode]
    good = sb.run(template.format(right), mode)
    assert good.status == RunStatus.OK, explain(good)
    bad = sb.run(template.format(wrong), mode)
    assert bad.status == RunStatus.RUNTIME_ERROR, explain(bad)


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
