"""Pairs of unrelated real answers that made the ``math`` verifier raise (each became an ``error`` verdict when the
consensus verifier compared cluster representatives). Found by comparing final answers of ProcessBench responses
(``shared/data/math/processbench_answers.jsonl``) and references pairwise. Root cause: sympy's immutable matrices are
``Expr`` too, so equation and relation sides were subtracted across a matrix and a scalar (``TypeError:
ImmutableDenseMatrix + Symbol``). Unequal, never an exception."""
from __future__ import annotations

import pytest

from verifiers.kinds.math.verifier import MathOptions, MathVerifier

# math-128's response: "\\mathbf{v}=\\begin{pmatrix} ... \\end{pmatrix}"; the others are final answers of other
# ProcessBench responses (omnimath, olympiadbench, math).
VECTOR = "\\mathbf{v}=\\begin{pmatrix} \\frac{1}{2} \\\\ \\frac{27}{10} \\\\ \\frac{9}{5} \\end{pmatrix}"
EQUATIONS = [
    "{f(x) = Rx+c}",
    "4x-5y=-50",
    "f(m) = 2m + 1007",
    "x = \\sqrt{\\frac{2}{3}}",
    "f(x) = x + 1 \\text{ and } g(y) = y + 1",
    "P(x, y)=0 \\text{ and } P(x, y)=\\left(x^{2}+y^{2}\\right)^{n}",
]
OPTIONS = MathOptions(last_number_fallback=False)  # as the consensus verifier sends its pairs


@pytest.mark.parametrize("other", EQUATIONS)
@pytest.mark.parametrize("vector_is_gold", [True, False])
def test_a_vector_equation_against_a_scalar_equation_is_unequal(other: str, vector_is_gold: bool) -> None:
    gold, answer = (VECTOR, other) if vector_is_gold else (other, VECTOR)
    verdict = MathVerifier().check(f"\\boxed{{{answer}}}", gold, OPTIONS)
    # "... and ..." states two equations: a hedge against one gold (rejected), never an error
    assert verdict.status.value in ("ok", "rejected") and verdict.score == 0.0, verdict.reason


@pytest.mark.parametrize("answer", [
    VECTOR,
    "\\mathbf{v}=\\begin{pmatrix} 1/2 \\\\ 2.7 \\\\ 9/5 \\end{pmatrix}",
])
def test_the_vector_still_equals_its_own_spellings(answer: str) -> None:
    assert MathVerifier().check(f"\\boxed{{{answer}}}", VECTOR, OPTIONS).score == 1.0


def test_a_wrong_vector_is_still_unequal() -> None:
    wrong = "\\mathbf{v}=\\begin{pmatrix} \\frac{1}{2} \\\\ \\frac{27}{10} \\\\ 2 \\end{pmatrix}"
    assert MathVerifier().check(f"\\boxed{{{wrong}}}", VECTOR, OPTIONS).score == 0.0


@pytest.mark.parametrize("gold, answer", [
    ("\\mathbf{v} < 2x+1", "x < \\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),  # relations: the same subtraction
    ("x < \\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\mathbf{v} < 2x+1"),
])
def test_a_relation_with_a_matrix_side_is_unequal(gold: str, answer: str) -> None:
    verdict = MathVerifier().check(f"\\boxed{{{answer}}}", gold, OPTIONS)
    assert (verdict.status.value, verdict.score) == ("ok", 0.0), verdict.reason
