"""No import cycle inside ``verifiers/``, ``sandbox/``, the service or the client: each package's modules form a DAG,
so any of them imports first.

Three graphs are checked. The import-time graph counts what runs when a module loads: top-level imports (including
those under a top-level ``try``/``if`` and in class bodies), not those under ``if TYPE_CHECKING:`` nor inside
functions. The design graph adds the ``TYPE_CHECKING`` imports: a cycle hidden behind them is still two modules
that each need the other (before the engine contract, base <-> registry, base -> context -> engine -> base and
engine <-> calibration.apply were such cycles, and this test failed on them). The full graph adds the imports inside
functions: a lazy import still couples two modules, and one that closes a cycle only hides it until someone moves it.

Importing ``a.b.c`` also runs the ``__init__`` of the packages ``a.b`` above it, so those count too, except the
packages that contain the importing module: they are always already executing when it loads, so an edge back to
them cannot start a cycle.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "verifiers"


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(body: list[ast.stmt], typing: bool) -> list[ast.Import | ast.ImportFrom]:
    """Import statements of the module body (``typing``: also those under ``if TYPE_CHECKING:``)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):
            if typing or not _is_type_checking(node.test):
                found += _module_level_imports(node.body, typing)
            found += _module_level_imports(node.orelse, typing)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                found += _module_level_imports(block, typing)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            found += _module_level_imports(node.body, typing)
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    out = {base}
    out.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known)
    return out


def _all_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def import_graph(typing: bool = False, lazy: bool = False, package: str = PACKAGE,
                 root: Path = ROOT) -> dict[str, set[str]]:
    files = {_module_name(p, root): p for p in (root / package).rglob("*.py")}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        ancestors = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        edges: set[str] = set()
        for node in _all_imports(tree) if lazy else _module_level_imports(tree.body, typing):
            for target in _targets(module, path.name == "__init__.py", node, known):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):  # the target and the packages it runs on the way
                    name = ".".join(parts[:i])
                    if name in known and name not in ancestors and name != module:
                        edges.add(name)
        graph[module] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def test_graph_sees_the_core_modules() -> None:
    graph = import_graph()
    assert "verifiers.engine.core" in graph and "verifiers.types" in graph["verifiers.engine.core"]


@pytest.mark.parametrize(("typing", "lazy"), [(False, False), (True, False), (True, True)],
                         ids=["import-time", "with-type-checking", "with-function-level"])
def test_no_import_cycle_inside_verifiers(typing: bool, lazy: bool) -> None:
    cycles = find_cycles(import_graph(typing, lazy))
    assert not cycles, "import cycles in verifiers/: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_graph_sees_the_sandbox_modules() -> None:
    graph = import_graph(package="sandbox")
    assert {"sandbox.bwrap.job", "sandbox.bwrap.frames"} <= graph["sandbox.bwrap.backend"] | graph["sandbox.bwrap.job"]


@pytest.mark.parametrize(("typing", "lazy"), [(False, False), (True, False), (True, True)],
                         ids=["import-time", "with-type-checking", "with-function-level"])
def test_no_import_cycle_inside_sandbox(typing: bool, lazy: bool) -> None:
    cycles = find_cycles(import_graph(typing, lazy, package="sandbox"))
    assert not cycles, "import cycles in sandbox/: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize(("typing", "lazy"), [(False, False), (True, False), (True, True)],
                         ids=["import-time", "with-type-checking", "with-function-level"])
def test_no_import_cycle_inside_the_service(typing: bool, lazy: bool) -> None:
    graph = import_graph(typing, lazy, package="reward_service")
    assert {"reward_service.resources.runtime", "reward_service.deps"} <= set(graph)
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in reward_service/: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize(("typing", "lazy"), [(False, False), (True, False), (True, True)],
                         ids=["import-time", "with-type-checking", "with-function-level"])
def test_no_import_cycle_inside_the_client(typing: bool, lazy: bool) -> None:
    """The client once had client <-> coalesce (the coalescer made its own client); it is handed a maker instead."""
    graph = import_graph(typing, lazy, package="reward_client", root=ROOT / "clients")
    assert {"reward_client.client", "reward_client.coalesce"} <= set(graph)
    assert "reward_client.coalesce" in graph["reward_client.client"]
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in clients/reward_client/: " + "; ".join(" <-> ".join(c) for c in cycles)
