"""The layout's dependency rule (docs/architecture.md), checked on the source: data flows route -> verifier ->
sandbox, so verifiers/ never imports the server, sandbox/ imports neither, and the thin client imports none of the
three (nor torch), since it is installed alone beside trainers. Every import counts, including those inside
functions and under TYPE_CHECKING: a lazy import still couples the packages."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "verifiers": {"reward_service", "environments"},
    "sandbox": {"reward_service", "verifiers", "environments"},
    "environments": {"reward_service"},
    "clients/reward_client": {"reward_service", "verifiers", "sandbox", "environments", "torch", "transformers"},
}


# Inside verifiers/: a kind is written against the contract (types, options, context, base) and never sees the engine
# that runs it; of sandbox/ it reads the protocol (sandbox.api, with the contextvar naming whose run it is) and the
# programs it sends (sandbox.inside, as files).
KINDS_MAY_IMPORT = {"sandbox.api", "sandbox.inside"}
KINDS_MUST_NOT_IMPORT = ("verifiers.engine", "sandbox")


def imported_modules(path: Path) -> set[tuple[str, int]]:
    """(module, line) for every absolute import in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name, node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module, node.lineno))
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def kind_violations() -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line} imports {module}"
            for path in sorted((ROOT / "verifiers" / "kinds").rglob("*.py"))
            for module, line in sorted(imported_modules(path))
            if any(_within(module, banned) for banned in KINDS_MUST_NOT_IMPORT)
            and not any(_within(module, allowed) for allowed in KINDS_MAY_IMPORT)]


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


def test_kinds_never_import_the_engine() -> None:
    assert (ROOT / "verifiers" / "kinds" / "code").is_dir()
    assert kind_violations() == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    """The walker finds imports in every place they can hide, so an empty list above means something."""
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from reward_service.app import x\n"
                      "def f():\n    import verifiers.engine\n")
    assert {root for root, _ in imported_roots(source)} == {"typing", "reward_service", "verifiers"}
    assert {module for module, _ in imported_modules(source)} == {"typing", "reward_service.app", "verifiers.engine"}


# The server opens the backends and hands them over; verifiers use only the sandbox's request and result types and the
# ``Backend`` base (sandbox.api), its fair turns and the in-sandbox programs' files.
BACKEND_MODULES = ("sandbox.bwrap", "sandbox.docker_backend", "sandbox.factory")


def test_verifiers_never_import_a_sandbox_backend() -> None:
    found = []
    for path in sorted((ROOT / "verifiers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {name}" for name in names
                      if name.startswith(BACKEND_MODULES)]
    assert found == []


@pytest.mark.parametrize("path", sorted((ROOT / "sandbox" / "inside").glob("*.py")), ids=lambda p: p.name)
def test_in_sandbox_programs_import_only_the_standard_library(path: Path) -> None:
    """They run on the bare interpreter inside the sandbox (sandbox/inside/README.md): nothing of the service's."""
    roots = {root for root, _ in imported_roots(path)}
    assert roots <= set(sys.stdlib_module_names), sorted(roots - set(sys.stdlib_module_names))


# Inside reward_service/: the edge's lower rooms never reach up. Schemas and middleware are read by routes; resources
# are what routes use; none of them knows a route, the app or a command line.
SERVICE_LAYERS = {
    "reward_service/schemas": ("reward_service.routes", "reward_service.resources", "reward_service.app",
                               "reward_service.cli", "reward_service.batch"),
    "reward_service/middleware.py": ("reward_service.routes", "reward_service.resources", "reward_service.app",
                                     "reward_service.cli", "reward_service.deps"),
    "reward_service/resources": ("reward_service.routes", "reward_service.app", "reward_service.cli",
                                 "reward_service.middleware", "reward_service.batch"),
    "reward_service/routes": ("reward_service.app", "reward_service.cli", "reward_service.batch"),
}


@pytest.mark.parametrize("room", sorted(SERVICE_LAYERS))
def test_service_rooms_never_reach_up(room: str) -> None:
    path = ROOT / room
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    assert files
    found = [f"{p.relative_to(ROOT)}:{line} imports {module}" for p in files
             for module, line in sorted(imported_modules(p))
             if any(_within(module, banned) for banned in SERVICE_LAYERS[room])]
    assert found == []
