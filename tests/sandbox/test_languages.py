"""Every language the sandbox offers, seven ways: hello (stdin to stdout), compile error, runtime error, failed
assertion, time limit, memory limit; and ``language_info`` lists each with its toolchain's version."""
from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from sandbox.api import RunStatus
from sandbox.languages import LANGUAGES
from tests.support.language_cases import CASES, Runner, explain

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# Languages the issue asks for whose toolchain no registry here supplies (see docs/sandbox.md).
NOT_INSTALLABLE = {"julia": "no Debian package, npm or PyPI toolchain for Julia here",
                   "swift": "no Debian package of the Swift language (Debian's swift is OpenStack's)"}


@pytest.fixture(scope="module")
def sb() -> Iterator[Runner]:
    with Runner() as runner:
        yield runner


def offered(sb: Runner, language: str) -> None:
    info = sb.backend.language_info()[language]
    if not info["available"]:
        pytest.fail(f"{language} is not available: {info.get('reason')} (scripts/setup.sh installs it)")


@pytest.mark.parametrize("language", sorted(CASES))
def test_hello_reads_stdin_and_writes_stdout(sb: Runner, language: str) -> None:
    offered(sb, language)
    r = sb.run(CASES[language].hello, language, stdin="world\n")
    assert r.status == RunStatus.OK, explain(r)
    assert r.stdout.strip() == "hello world", explain(r)


@pytest.mark.parametrize("language", sorted(CASES))
def test_compile_error_is_named(sb: Runner, language: str) -> None:
    offered(sb, language)
    cases = CASES[language]
    r = sb.run(cases.compile_error, language)
    assert r.status == (RunStatus.COMPILE_ERROR if cases.compiled else RunStatus.RUNTIME_ERROR), explain(r)
    if cases.compiled:
        assert r.compile_output.strip(), "a compile error says why"


@pytest.mark.parametrize("language", sorted(CASES))
def test_runtime_error_fails_the_run(sb: Runner, language: str) -> None:
    offered(sb, language)
    r = sb.run(CASES[language].runtime_error, language)
    assert r.status == RunStatus.RUNTIME_ERROR, explain(r)
    assert r.exit_code != 0 or r.signal is not None


@pytest.mark.parametrize("language", sorted(CASES))
def test_failed_assertion_fails_the_run(sb: Runner, language: str) -> None:
    """No build flag or runtime default turns assertions off (Java without -ea, NDEBUG, PHP's zend.assertions,
    C#'s Debug.Assert in Mono, console.assert, rackunit outside a suite)."""
    offered(sb, language)
    r = sb.run(CASES[language].assertion, language)
    assert r.status == RunStatus.RUNTIME_ERROR, explain(r)
    assert r.exit_code not in (0, None) or r.signal is not None, explain(r)


@pytest.mark.parametrize("language", sorted(CASES))
def test_time_limit_stops_a_loop(sb: Runner, language: str) -> None:
    offered(sb, language)
    r = sb.run(CASES[language].loop, language, wall_s=3, cpu_s=2)
    assert r.status == RunStatus.TIMEOUT, explain(r)


@pytest.mark.parametrize("language", sorted(CASES))
def test_memory_limit_stops_an_allocator(sb: Runner, language: str) -> None:
    offered(sb, language)
    if not CASES[language].memory:
        pytest.skip(f"{language} programs cannot allocate memory at run time")
    r = sb.run(CASES[language].memory, language, memory_mb=256, wall_s=30, cpu_s=20)
    assert r.status == RunStatus.MEMORY_EXCEEDED, explain(r)


def test_every_language_is_tested_and_listed_with_its_version(sb: Runner) -> None:
    info = sb.backend.language_info()
    modes = {"pytest", "junit", "jest", "go_test", "rust_test", "kotlin_script"}  # tests/sandbox/test_test_modes.py
    assert {spec.name for spec in LANGUAGES} - modes == set(CASES)
    for name in CASES:
        assert info[name]["available"], (name, info[name])
        assert info[name]["version"], f"{name} lists no version"
    assert not set(NOT_INSTALLABLE) & set(info)
