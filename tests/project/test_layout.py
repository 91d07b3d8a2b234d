"""The tree a newcomer reads: the contract on top of verifiers/, a small top level in reward_service/, no module too
long to read in one sitting, and tests that mirror the packages without importing each other."""
from __future__ import annotations

import ast

from tests.support.server import ROOT

TESTS = ROOT / "tests"
# The programs that run inside the sandbox are single files by design (run as scripts, standard library only).
LONG_BY_DESIGN = {"sandbox/inside/harness.py", "sandbox/inside/supervisor.py"}


def top_level_modules(package: str) -> list[str]:
    return sorted(p.name for p in (ROOT / package).glob("*.py"))


def test_verifiers_top_level_is_the_contract() -> None:
    modules = top_level_modules("verifiers")
    assert len(modules) <= 8, modules


def test_reward_service_top_level_is_small() -> None:
    modules = top_level_modules("reward_service")
    assert len(modules) <= 10, modules


def test_no_shipped_module_over_700_lines() -> None:
    long = []
    for package in ("reward_service", "verifiers", "sandbox", "environments", "clients/reward_client"):
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in LONG_BY_DESIGN and len(path.read_text().splitlines()) > 700:
                long.append(rel)
    assert not long, long


def test_tests_live_in_folders_that_mirror_the_packages() -> None:
    assert not list(TESTS.glob("test_*.py")), "a test module belongs in the folder of the package it tests"
    folders = {p.parent.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py")}
    assert {"verifiers", "sandbox", "environments", "service", "clients"} <= folders, folders
    for path in TESTS.rglob("*.py"):
        assert (path.parent / "__init__.py").exists(), f"{path.parent} is not a package: its modules' names would clash"


def test_no_test_module_imports_another() -> None:
    test_modules = {".".join(p.relative_to(ROOT).with_suffix("").parts) for p in TESTS.rglob("test_*.py")}
    found = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(ROOT)} imports {n}" for n in names
                      if n in test_modules or n == "tests.conftest" or n.rsplit(".", 1)[-1].startswith("test_")]
    assert not found, found
