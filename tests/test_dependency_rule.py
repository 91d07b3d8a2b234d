"""The layout's dependency rule (docs/architecture.md), checked on the source: data flows route -> verifier ->
sandbox, so verifiers/ never imports the server, sandbox/ imports neither, and the thin client imports none of the
three (nor torch), since it is installed alone beside trainers. Every import counts, including those inside
functions and under TYPE_CHECKING: a lazy import still couples the packages."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "verifiers": {"reward_service"},
    "sandbox": {"reward_service", "verifiers"},
    "clients/reward_client": {"reward_service", "verifiers", "sandbox", "torch", "transformers"},
}


def imported_roots(path: Path) -> set[tuple[str, int]]:
    """(top-level package, line) for every absolute import in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name.split(".")[0], node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
    return found


def violations(package: str) -> list[str]:
    banned = FORBIDDEN[package]
    return [f"{path.relative_to(ROOT)}:{line} imports {root}"
            for path in sorted((ROOT / package).rglob("*.py"))
            for root, line in sorted(imported_roots(path)) if root in banned]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_what_it_must_not(package: str) -> None:
    assert (ROOT / package).is_dir()
    assert violations(package) == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    """The walker finds imports in every place they can hide, so an empty list above means something."""
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from reward_service.app import x\n"
                      "def f():\n    import verifiers.engine\n")
    assert {root for root, _ in imported_roots(source)} == {"typing", "reward_service", "verifiers"}
