"""Real data through the real sandbox: HumanEval canonical solutions pass, hollowed ones fail; MBPP reference
solutions pass except a known list."""
from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.code import CodeRunner, humaneval, humaneval_reference, mbpp, mbpp_reference
from verifiers.types import Status

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# MBPP items whose reference solution does not pass its own tests here. 123 (amicable numbers up to 9999) is not
# wrong but quadratic: it passes alone and can overrun a per-test budget on a loaded machine.
MBPP_KNOWN_FAILING = {123}


@pytest.fixture(scope="module")
def runner() -> Iterator[CodeRunner]:
    r = CodeRunner(warm_pool=4)
    yield r
    r.close()


def _hollow(task: dict) -> str:
    """The prompt's function with its body replaced by ``return None`` (helpers and imports kept)."""
    module = ast.parse(task["prompt"] + task["canonical_solution"])
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == task["entry_point"]:
            node.body = [ast.Return(ast.Constant(None))]
    return ast.unparse(module)


@pytest.mark.timeout(900)
def test_humaneval_canonical_pass_and_return_none_fails(runner: CodeRunner, shared_data: Path) -> None:
    tasks = humaneval(shared_data)
    assert len(tasks) == 164
    good = runner.many([(t["prompt"] + t["canonical_solution"], humaneval_reference(t)) for t in tasks],
                       test_timeout_s=20)
    failing = [(t["task_id"], v.reason) for t, v in zip(tasks, good) if v.score != 1.0]
    assert not failing
    hollow = runner.many([(_hollow(t), humaneval_reference(t)) for t in tasks], test_timeout_s=20)
    assert all(v.status == Status.OK and v.score is not None and v.score < 1.0 for v in hollow)
    zero = sum(v.score == 0.0 for v in hollow)
    print(f"\nHumanEval: 164/164 canonical pass; return-None: {zero} score 0, {164 - zero} partial")
    assert zero >= 150  # a few tasks have a test that None happens to satisfy (e.g. an empty-input case)


@pytest.mark.timeout(1200)
def test_mbpp_reference_solutions(runner: CodeRunner, shared_data: Path) -> None:
    tasks = mbpp(shared_data)
    assert len(tasks) == 974
    verdicts = runner.many([(t["code"], mbpp_reference(t)) for t in tasks], test_timeout_s=30)
    failing = {t["task_id"]: v.reason for t, v in zip(tasks, verdicts) if v.score != 1.0}
    print(f"\nMBPP: {974 - len(failing)}/974 reference solutions pass; failing: {failing}")
    assert set(failing) <= MBPP_KNOWN_FAILING, failing
    assert 974 - len(failing) >= 973
