"""Unit tests appended to the program in every language: HumanEval-X's canonical solutions pass in its six
languages and a broken one fails; MultiPL-E's tests run in its ten (hand-written solutions pass, empty bodies and
wrong ones fail), with the verdict the language's own commands give the same program run bare."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.code import CodeRunner
from tests.support.multilang import (
    BROKEN_RUST_CRATES,
    BROKEN_TRUNCATE,
    HUMANEVAL_X,
    KNOWN_FAILING,
    MULTIPL_E,
    RUST_CRATE_PROBLEMS,
    SOLUTIONS,
    bare_passes,
    fixed_prompt,
    humaneval_x,
    humaneval_x_reference,
    multipl_e,
    multipl_e_reference,
    wrong_body,
)
from verifiers.kinds.code.appended import assemble_appended
from verifiers.types import Status

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
SAMPLE = range(0, 164, 16)  # eleven problems per language, spread over the set


@pytest.fixture(scope="module")
def runner() -> Iterator[CodeRunner]:
    r = CodeRunner(warm_pool=2)
    yield r
    r.close()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("lang", HUMANEVAL_X)
def test_humaneval_x_canonical_pass_and_broken_fails(runner: CodeRunner, shared_data: Path, lang: str) -> None:
    tasks = humaneval_x(shared_data, lang)
    assert len(tasks) == 164
    known = KNOWN_FAILING.get(lang, set())
    crates = set(RUST_CRATE_PROBLEMS) if lang == "rust" else set()
    chosen = sorted({*SAMPLE, *known, *crates})
    good = runner.many([(tasks[i]["canonical_solution"], humaneval_x_reference(tasks[i], lang)) for i in chosen],
                       test_timeout_s=30)
    failing = {i: v.reason for i, v in zip(chosen, good) if v.score != 1.0}
    assert set(failing) == known, failing
    task = tasks[2]
    broken = runner.verify(BROKEN_TRUNCATE[lang], humaneval_x_reference(task, lang), test_timeout_s=30)
    assert broken.status == Status.OK and broken.score is not None and broken.score < 1.0, broken
    empty = runner.verify("}\n" if lang != "python" else "    pass\n", humaneval_x_reference(task, lang),
                          test_timeout_s=30)
    assert empty.score == 0.0, empty


def test_humaneval_x_rust_uses_its_crates(runner: CodeRunner, shared_data: Path) -> None:
    """The declarations' `use rand::Rng; use regex::Regex; use md5;` compile as written, and the problems whose
    solutions call regex and md5 fail a wrong body that calls them too."""
    tasks = humaneval_x(shared_data, "rust")
    for i, call in RUST_CRATE_PROBLEMS.items():
        assert call in tasks[i]["canonical_solution"] and "use rand::Rng;" in tasks[i]["declaration"]
        reference = humaneval_x_reference(tasks[i], "rust")
        assert "use md5;" in reference["prompt"]
        good = runner.verify(tasks[i]["canonical_solution"], reference, test_timeout_s=30)
        assert good.score == 1.0, good
        broken = runner.verify(BROKEN_RUST_CRATES[i], reference, test_timeout_s=30)
        # compiled and ran: libtest names the failed test (a compile error would be the one test "tests")
        assert broken.status == Status.OK and broken.score == 0.0, broken
        assert [t["status"] for t in broken.details["tests"]] == ["failed"], broken
        assert broken.details["tests"][0]["name"].startswith("tests::test_"), broken


def test_go_and_rust_tests_are_scored_one_by_one(runner: CodeRunner) -> None:
    """A runner that names its tests gives each its own result: partial credit, as for Python."""
    go = {"language": "go_test", "test": (
        "func TestOne(t *testing.T) { if Add(1, 1) != 2 { t.Fatal(\"one\") } }\n"
        "func TestTwo(t *testing.T) { if Add(2, 2) != 5 { t.Fatal(\"two\") } }\n")}
    program = "```go\npackage main\nimport \"testing\"\nfunc Add(a, b int) int { return a + b }\n```"
    v = runner.verify(program, go, test_timeout_s=30)
    assert [(t["name"], t["status"]) for t in v.details["tests"]] == [("TestOne", "passed"), ("TestTwo", "failed")]
    assert v.score == 0.5
    rust = {"language": "rust_test", "test": (
        "#[cfg(test)]\nmod tests {\n use super::*;\n #[test] fn one() { assert_eq!(add(1, 1), 2); }\n"
        " #[test] fn two() { assert_eq!(add(2, 2), 5); }\n}\n")}
    v = runner.verify("fn add(a: i32, b: i32) -> i32 { a + b }\n", rust, test_timeout_s=30)
    assert sorted((t["name"], t["status"]) for t in v.details["tests"]) == [("tests::one", "passed"),
                                                                            ("tests::two", "failed")]
    assert v.score == 0.5


def test_jest_tests_are_scored_one_by_one(runner: CodeRunner) -> None:
    """jest's JSON report names each test: a TypeScript or JavaScript fence, each test its own result; a suite
    that cannot run is one failed test, not an empty score."""
    jest = {"language": "jest", "test": (
        "describe('add', () => {\n  test('one', () => { expect(add(1, 1)).toBe(2); });\n"
        "  test('two', () => { expect(add(2, 2)).toBe(5); });\n});\n")}
    for fence in ("ts", "javascript"):
        program = f"Here it is:\n```{fence}\nfunction add(a, b) {{ return a + b; }}\n```"
        v = runner.verify(program, jest, test_timeout_s=30)
        assert [(t["name"], t["status"]) for t in v.details["tests"]] == [("add one", "passed"),
                                                                          ("add two", "failed")], v
        assert v.score == 0.5 and "Expected: 5" in v.details["tests"][1]["message"], v
    v = runner.verify("```ts\nfunction add(a: number, b: number): number { return a + b\n```", jest,
                      test_timeout_s=30)
    assert v.score == 0.0 and [t["name"] for t in v.details["tests"]] == ["tests"], v


def test_c_tests_assert_even_when_the_program_defines_ndebug(runner: CodeRunner) -> None:
    reference = {"language": "c", "test": "int main(void) { assert(twice(2) == 5); return 0; }"}
    program = "#define NDEBUG\n#include <assert.h>\nint twice(int x) { return 2 * x; }\n"
    assert runner.verify(program, reference, test_timeout_s=30).score == 0.0
    assert runner.verify(program.replace("2 * x", "2 * x + 1"), reference, test_timeout_s=30).score == 1.0


@pytest.mark.timeout(900)
@pytest.mark.parametrize("lang", MULTIPL_E)
def test_multipl_e_solutions_pass_empty_bodies_fail_as_run_bare(runner: CodeRunner, shared_data: Path,
                                                                lang: str) -> None:
    tasks = multipl_e(shared_data, lang)
    for name, bodies in SOLUTIONS.items():
        task = tasks[name]
        reference = multipl_e_reference(lang, task)
        wrong = wrong_body(name, lang, bodies[lang])
        for body, expected in ((bodies[lang], 1.0), ("", 0.0), (wrong, 0.0)):
            verdict = runner.verify(body or "\n", reference, test_timeout_s=30)
            assert verdict.score == expected, (name, body, verdict.reason)
            program = assemble_appended(reference["language"], fixed_prompt(lang, task["prompt"]), body,
                                        task["tests"])
            assert bare_passes(lang, program) == (expected == 1.0), (name, "bare", program)
