"""Unit tests as code appended to the program, in any language (MultiPL-E's and HumanEval-X's form): the program,
then its tests, run as one program; it passes when it exits 0. Where the language's test runner names each test
(``go test -v``, Rust's libtest, jest's JSON report), each is reported and scored on its own.
"""
from __future__ import annotations

import json
import re
from typing import Any

from sandbox.api import RunResult, RunStatus
from verifiers.types import InvalidReference

MAX_TEST_CHARS = 1 << 20
# C and C++ tests use assert.h: a program that defines NDEBUG would turn every appended assert into nothing, so the
# tests start by undoing it (assert.h is made to be included again) and their asserts are live whatever came before.
_TEST_PRELUDE = {"c": "#undef NDEBUG\n#include <assert.h>\n", "cpp": "#undef NDEBUG\n#include <cassert>\n"
                 "#include <assert.h>\n"}

# (pattern, status of its match) per runner that prints one line per test
_GO = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)", re.M)
_RUST = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)\s*$", re.M)


def appended_fields(reference: dict[str, Any], key: str) -> tuple[str, str | None]:
    """The test code and the prompt (the program's head, prepended to a completion that lacks it)."""
    tests = reference.get(key)
    if not isinstance(tests, str) or not tests.strip():
        raise InvalidReference(f"'{key}' must be the test code appended to the program (a non-empty string)")
    if len(tests) > MAX_TEST_CHARS:
        raise InvalidReference(f"'{key}' is over {MAX_TEST_CHARS} characters")
    prompt = reference.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise InvalidReference("'prompt' must be a string")
    return tests, prompt


def _signature(prompt: str) -> str:
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def assemble_appended(language: str, prompt: str | None, code: str, tests: str) -> str:
    """The program the sandbox runs: the prompt when the completion is only its body (it lacks the prompt's last
    line, the signature), the completion, then the tests."""
    program = code
    if prompt and _signature(prompt) not in code:
        program = prompt + code
    return program.rstrip("\n") + "\n\n" + _TEST_PRELUDE.get(language, "") + tests.rstrip("\n") + "\n"


def unit_results(language: str, result: RunResult) -> list[tuple[str, bool, str]]:
    """Per-test (name, passed, message) where the runner reports each test and the run ended by itself ([] when
    it does not, or when the run was stopped: then the run's status is the one result)."""
    if result.status not in (RunStatus.OK, RunStatus.RUNTIME_ERROR):
        return []
    found: list[tuple[str, bool, str]] = []
    if language == "go_test":
        found = [(name, status == "PASS", "" if status == "PASS" else f"{name} failed")
                 for status, name in _GO.findall(result.stdout) if status != "SKIP" and "/" not in name]
    elif language == "rust_test":
        found = [(name, status == "ok", "" if status == "ok" else f"{name} failed")
                 for name, status in _RUST.findall(result.stdout) if status != "ignored"]
    elif language == "jest":
        found = _jest_results(result.stdout)
    if not found:
        return []
    if result.status != RunStatus.OK and all(ok for _, ok, _ in found):
        return []  # the run failed outside any reported test (a panic after them): the run's verdict stands
    return found


def _jest_results(stdout: str) -> list[tuple[str, bool, str]]:
    """Each test of jest's JSON report, which the jest mode prints as the last line of stdout ([] when a suite
    could not run: a syntax error is the run's failure, not a test's)."""
    lines = stdout.rstrip("\n").rsplit("\n", 1)
    try:
        report = json.loads(lines[-1])
        found: list[tuple[str, bool, str]] = []
        for suite in report["testResults"]:
            tests = suite["assertionResults"]
            if suite.get("status") == "failed" and not tests:
                return []
            for test in tests:
                if test["status"] in ("passed", "failed"):
                    messages = test.get("failureMessages") or []
                    found.append((str(test["fullName"]), test["status"] == "passed",
                                  str(messages[0]) if messages else ""))
        return found
    except (ValueError, KeyError, TypeError, IndexError):
        return []
