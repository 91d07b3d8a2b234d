"""Reference → test plan: which tests exist, their weights and time budgets, and the judge-side test code.

Function and assert tests are rewritten here (outside the sandbox) so a malformed reference is an
``invalid_reference`` before any sandbox time is spent: every top-level statement of ``check`` that asserts
something becomes one test (``with __unit__(i): ...``), each MBPP assert string is one test, and ``assert a == b``
becomes ``assert __eq__check(a, b)`` so a failure can say what the candidate returned.
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import json
import marshal
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from verifiers.kinds.code.appended import appended_fields
from verifiers.types import InvalidReference

Compare = Literal["exact", "tokens", "float"]
TESTS_FILENAME, SETUP_FILENAME = "<tests>", "<test setup>"  # as the harness names them when it compiles them
BYTECODE_MAGIC = importlib.util.MAGIC_NUMBER.hex()  # which interpreters can load tests_bytecode
# What parsing or compiling hostile source raises besides SyntaxError: the parser's and compiler's depth limits
# (RecursionError, and MemoryError for a parser stack overflow), a NUL (ValueError), a literal too large
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
HOST_COMPILE_CHARS = 64 << 10  # longer tests are compiled by the judge (HumanEval's and MBPP's: 4.2 KiB at most)
HOST_BYTECODE_BYTES = 1 << 20


@dataclass
class Case:
    input: str
    output: str


@dataclass(frozen=True)
class TestPlan:
    kind: Literal["function", "asserts", "stdio", "appended"]
    language: str
    names: list[str]  # one short label per test, for details.tests
    weights: list[float]
    timeout_s: float | None  # per test, from the reference (None: the option's default)
    judge_code: str = ""  # function/asserts: the rewritten test code the judge executes
    setup: str = ""  # reference code the judge runs after the program loaded (MBPP setup, the prompt's helpers)
    # judge_code and setup compiled here (marshal, this interpreter's format), once per plan: compiling them in each
    # run's judge cost it about 0.5 ms of CPU, a fresh process's allocations and page copies included
    tests_bytecode: bytes = b""
    setup_bytecode: bytes = b""
    subjects: list[str] = field(default_factory=list)  # names the tests take from the program even if builtins
    preload: list[str] = field(default_factory=list)  # modules the judge loads before the candidate: preload_modules
    entry_point: str | None = None
    prompt: str | None = None
    cases: list[Case] = field(default_factory=list)
    compare: Compare = "tokens"
    tolerance: float = 1e-6

    @property
    def count(self) -> int:
        return len(self.names)


class _ExplainEq(ast.NodeTransformer):
    """``assert a == b`` (no message) → ``assert __eq__check(a, b)``: same truth value, but the judge keeps a, b."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        test = node.test
        if (node.msg is None and isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq)):
            node.test = ast.Call(ast.Name("__eq__check", ast.Load()), [test.left, test.comparators[0]], [])
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node  # nested helpers keep their asserts untouched


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _walk_here(node: ast.AST) -> list[ast.AST]:
    """The nodes that run when ``node`` runs: nested function, class and lambda bodies run only when called."""
    found: list[ast.AST] = []
    todo = [node]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(child for child in ast.iter_child_nodes(current)
                    if not (isinstance(child, _DEFINITIONS) and current is not child))
    return found


def _asserting_helpers(module: ast.Module) -> set[str]:
    """Names of the test module's functions (at any depth) that assert, directly or through another such function."""
    functions = [n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    helpers: set[str] = set()
    while True:
        more = {f.name for f in functions if f.name not in helpers and _asserts(f.body, helpers)}
        if not more:
            return helpers
        helpers |= more


def _asserts(body: list[ast.stmt], helpers: set[str]) -> bool:
    return any(isinstance(node, ast.Assert) and not (isinstance(node.test, ast.Constant) and node.test.value)
               or isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers
               for stmt in body for node in _walk_here(stmt))


def _is_test(stmt: ast.stmt, helpers: set[str]) -> bool:
    """A statement that asserts something about the candidate when it runs, itself or through a helper of the test
    module that asserts (``assert True`` is not a test). Defining a helper is not: its asserts run where it is
    called, and a ``def`` taken for a test would pass by defining a function while the calls ran outside any test."""
    return not isinstance(stmt, _DEFINITIONS) and _asserts([stmt], helpers)


def _unit(index: int, body: list[ast.stmt]) -> ast.With:
    body = [_ExplainEq().visit(stmt) for stmt in body]
    item = ast.withitem(ast.Call(ast.Name("__unit__", ast.Load()), [ast.Constant(index)], []))
    return ast.With([item], body, lineno=body[0].lineno if body else 1)  # unparse reads a with's line


def _label(lines: list[str], stmt: ast.stmt) -> str:
    """The first line of a test as the reference wrote it (``col_offset`` counts UTF-8 bytes)."""
    line = lines[stmt.lineno - 1].encode()[stmt.col_offset:].decode(errors="replace").rstrip()
    return line if len(line) <= 160 else line[:157] + "..."


def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise InvalidReference(f"{what} is not valid Python: {exc.msg} (line {exc.lineno})") from None
    except PARSE_ERRORS as exc:
        raise InvalidReference(f"{what} cannot be parsed: {type(exc).__name__} (nested too deep, or a NUL)") from None


def prompt_helpers(prompt: str | None, entry: str) -> str:
    """The prompt without the entry point's stub: its imports and helpers (HumanEval/32 ``poly``, /38
    ``encode_cyclic``) are part of the reference, so the judge defines them itself, after the program's names; a
    program redefining ``encode_cyclic`` as the identity only changes its own copy. "" when the prompt is no module."""
    if not prompt:
        return ""
    try:
        module = ast.parse(prompt)
    except PARSE_ERRORS:
        return ""
    module.body = [s for s in module.body
                   if not (isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == entry)]
    return ast.unparse(module) if module.body else ""


def preload_modules(*sources: str | ast.AST) -> list[str]:
    """The modules the reference's code needs in the judge, loaded before it forks the candidate: what it imports
    (HumanEval prompts' ``typing``, ``math``; MBPP ``test_imports``; the tests' own imports) and the standard modules
    its tests use without importing them (asserts on ``math.pi`` that rely on the program's ``import math``). The
    judge imports nothing after that, so this list is the whole set of modules the program's names can mean in the
    tests; loading them first also spares the program its own import, and reads nothing the program wrote."""
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    names: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source) if isinstance(source, str) else source
        except PARSE_ERRORS:
            continue
        bound: set[str] = set()
        used: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
        names.update((used & stdlib) - bound)
    return sorted(n for n in names if n.split(".")[0] not in _NO_PRELOAD and n.split(".")[-1] != "__main__")


# Side effects on import, or GUI: never loaded ahead (a reference that really imports one gets it when its tests run).
_NO_PRELOAD = frozenset({"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"})


def assert_subjects(module: ast.Module, setup: str) -> list[str]:
    """The functions MBPP asserts test: the names they call that neither Python nor the tests' imports and setup
    provide. A builtin name counts only when the asserts call nothing else (MBPP 126 names its function ``sum``)."""
    bound = {n.asname or n.name.split(".")[0] for node in ast.walk(module)
             if isinstance(node, (ast.Import, ast.ImportFrom)) for n in node.names}
    setup_tree = ast.parse(setup) if setup else ast.Module([], [])
    bound |= {n.id for n in ast.walk(setup_tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in ast.walk(setup_tree)
              if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    bound |= {n.asname or n.name.split(".")[0] for node in ast.walk(setup_tree)
              if isinstance(node, (ast.Import, ast.ImportFrom)) for n in node.names}
    called = sorted({n.func.id for n in ast.walk(module) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
                    - bound - {"__eq__check", "__unit__"})
    own = [name for name in called if not hasattr(builtins, name)]
    return own or called


def _function_plan(ref: dict[str, Any]) -> tuple[ast.Module, list[str], str]:
    test, entry = ref.get("test"), ref.get("entry_point")
    if not isinstance(test, str) or not test.strip():
        raise InvalidReference("'test' must be Python source defining check(candidate)")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise InvalidReference("'entry_point' must name the function under test")
    module = _parse(test, "'test'")
    check = next((s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)
    if check is None:
        raise InvalidReference("'test' must define check(candidate)")
    names: list[str] = []
    body: list[ast.stmt] = []
    helpers = _asserting_helpers(module) - {"check"}
    lines = test.splitlines()
    for stmt in check.body:
        if _is_test(stmt, helpers):
            names.append(_label(lines, stmt))
            body.append(_unit(len(names) - 1, [stmt]))
        else:
            body.append(stmt)
    if not names:  # asserts hidden in helpers: the whole check is one test
        check.body = [_unit(0, check.body)]
        names.append(f"check({entry})")
    else:
        check.body = body
    module.body.append(ast.Expr(ast.Call(ast.Name("check", ast.Load()), [ast.Name(entry, ast.Load())], [])))
    return module, names, entry


def _asserts_plan(ref: dict[str, Any]) -> tuple[ast.Module, list[str], str]:
    tests = ref.get("test_list")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t.strip() for t in tests):
        raise InvalidReference("'test_list' must be a non-empty list of Python assert statements")
    setup = ref.get("test_setup_code") or ""
    imports = ref.get("test_imports") or []
    if not isinstance(setup, str) or not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise InvalidReference("'test_setup_code' must be a string and 'test_imports' a list of strings")
    _parse(setup, "'test_setup_code'")
    module = _parse("\n".join(imports), "'test_imports'")
    names = []
    for index, source in enumerate(tests):
        stmts = _parse(source, f"test_list[{index}]").body
        module.body.append(_unit(index, stmts))
        names.append(source.strip().splitlines()[0][:160])
    return module, names, setup


def _cases(ref: dict[str, Any]) -> list[Case]:
    cases = ref.get("cases")
    if not isinstance(cases, list) or not cases:
        raise InvalidReference("'cases' must be a non-empty list of {input, output}")
    out = []
    for index, case in enumerate(cases):
        if not isinstance(case, dict) or not isinstance(case.get("output"), str):
            raise InvalidReference(f"cases[{index}] needs a string 'output'")
        stdin = case.get("input", "")
        if not isinstance(stdin, str):
            raise InvalidReference(f"cases[{index}].input must be a string")
        out.append(Case(stdin, case["output"]))
    return out


def _weights(ref: dict[str, Any], count: int) -> list[float]:
    weights = ref.get("weights")
    if weights is None:
        return [1.0] * count
    if (
        not isinstance(weights, list)
        or len(weights) != count
        or not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0
                   for w in weights)
        or sum(weights) <= 0
    ):
        raise InvalidReference(f"'weights' must be {count} non-negative numbers (one per test) with a positive sum")
    return [float(w) for w in weights]


def _bytecode(source: str, filename: str) -> bytes:
    """The reference's test code (from the client, never from the policy), already parsed above, compiled for the
    judge; the harness compiles the text itself where its interpreter's bytecode differs (BYTECODE_MAGIC). Left to
    the judge, under the sandbox's limits, is code whose compiling costs the host more than its size says: a
    ``finally`` body is compiled once per way out of its ``try`` (nested, the copies double per level), and text
    over HOST_COMPILE_CHARS or bytecode over HOST_BYTECODE_BYTES is no plan worth keeping in memory."""
    if not source or len(source) > HOST_COMPILE_CHARS or "finally" in source:
        return b""
    try:
        bytecode = marshal.dumps(compile(source, filename, "exec", dont_inherit=True))
    except PARSE_ERRORS as exc:
        # parses, but cannot compile: ``break`` outside a loop, ``nonlocal`` at module level, nesting too deep
        detail = f"{exc.msg} (line {exc.lineno})" if isinstance(exc, SyntaxError) else type(exc).__name__
        what = "the tests" if filename == TESTS_FILENAME else "the tests' set-up"
        raise InvalidReference(f"{what} cannot be compiled: {detail}") from None
    return bytecode if len(bytecode) <= HOST_BYTECODE_BYTES else b""


def build_plan(reference: Any) -> TestPlan:
    """The tests of a reference, ready to run. A plan depends on the reference alone, and the rollouts of a group
    (and later epochs) share theirs, so plans are kept by the reference's JSON text: parsing and rewriting the tests
    is most of the host's work per program."""
    try:
        key = json.dumps(reference, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return _build_plan(reference)
    return _cached_plan(key)


@functools.lru_cache(maxsize=1024)
def _cached_plan(key: str) -> TestPlan:
    return _build_plan(json.loads(key))


def _build_plan(reference: Any) -> TestPlan:
    if not isinstance(reference, dict):
        raise InvalidReference("reference must be an object holding 'test', 'test_list' or 'cases'")
    language = reference.get("language", "python")
    if not isinstance(language, str) or not language:
        raise InvalidReference("'language' must be a string")
    language = language.lower()
    timeout = reference.get("timeout_s")
    if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600):
        raise InvalidReference("'timeout_s' must be a number of seconds in (0, 600]")
    kinds = [k for k in ("test", "tests", "test_list", "cases") if k in reference]
    if len(kinds) != 1:
        raise InvalidReference("reference must hold exactly one of 'test' (+'entry_point'), 'tests', 'test_list' or "
                               "'cases'")
    timeout_s = float(timeout) if timeout is not None else None
    python = language in ("python", "python3", "py")
    if kinds[0] == "tests" or (kinds[0] == "test" and not python):
        tests, prompt = appended_fields(reference, kinds[0])
        # one test, the whole program's exit status, until the run names its tests (appended.unit_results)
        return TestPlan("appended", language, ["tests"], [1.0], timeout_s, judge_code=tests,
                        prompt=prompt)
    if kinds[0] == "test_list" and not python:
        raise InvalidReference("'test_list' asserts are Python; other languages append their tests as code ('test') "
                               "or give stdin/stdout 'cases'")
    # the rewritten tests are written out once (ast.unparse needs no source positions but a with's line, which
    # _unit sets) and their tree serves the module and name scans below
    if kinds[0] == "test":
        tree, names, entry = _function_plan(reference)
        code = ast.unparse(tree)
        prompt = reference.get("prompt")
        if prompt is not None and not isinstance(prompt, str):
            raise InvalidReference("'prompt' must be a string")
        setup = prompt_helpers(prompt, entry)
        return TestPlan("function", "python", names, _weights(reference, len(names)), timeout_s,
                        judge_code=code, entry_point=entry, prompt=prompt, setup=setup,
                        tests_bytecode=_bytecode(code, TESTS_FILENAME), setup_bytecode=_bytecode(setup, SETUP_FILENAME),
                        subjects=[entry], preload=preload_modules(prompt or "", setup, tree))
    if kinds[0] == "test_list":
        tree, names, setup = _asserts_plan(reference)
        code = ast.unparse(tree)
        return TestPlan("asserts", "python", names, _weights(reference, len(names)), timeout_s,
                        judge_code=code, setup=setup,
                        tests_bytecode=_bytecode(code, TESTS_FILENAME), setup_bytecode=_bytecode(setup, SETUP_FILENAME),
                        subjects=assert_subjects(tree, setup), preload=preload_modules(setup, tree))
    cases = _cases(reference)
    compare = reference.get("compare", "tokens")
    if compare not in ("exact", "tokens", "float"):
        raise InvalidReference("'compare' must be exact, tokens or float")
    tolerance = reference.get("tolerance", 1e-6)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise InvalidReference("'tolerance' must be a non-negative number")
    names = [f"case {i}" for i in range(len(cases))]
    return TestPlan("stdio", language, names, _weights(reference, len(cases)), timeout_s,
                    cases=cases, compare=compare, tolerance=float(tolerance))
