"""The compound-shape fast path (tuples, intervals, unions, matrices recognised without the LaTeX parser) never
changes a verdict: whatever it recognises, the parser reads as the same kind of object, on real answers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy
from sympy.matrices.matrixbase import MatrixBase

from verifiers.kinds.math.extract import extract, split_alternatives
from verifiers.kinds.math.normalize import split_condition, unwrap
from verifiers.kinds.math.shape import compound_shape
from verifiers.kinds.math.symbolic import is_multi_valued, parse_latex
from verifiers.kinds.math.verifier import MathVerifier

V = MathVerifier()
OPTS = V.parse_options({})
COMPOUND = (sympy.Tuple, sympy.Interval, sympy.Union, sympy.EmptySet.__class__, MatrixBase)


def _parser_agrees(text: str) -> bool:
    expr = parse_latex(text)
    return isinstance(expr, COMPOUND) and not is_multi_valued(expr)


@pytest.mark.parametrize(
    "text, shape",
    [
        ("(1,2)", "tuple or interval"),
        (r"\left( \frac{3}{2}, -13 \right)", "tuple or interval"),
        (r"(-\infty, 3]", "tuple or interval"),
        (r"(-\sqrt{3}, \sqrt{3})", "tuple or interval"),
        ("(6,31,-1)", "tuple or interval"),
        (r"(2,12) \cup (12,102)", "union"),
        (r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}", "matrix"),
        ("[1,1]", None),  # the set {1}: the parser reads it as the value 1
        ("(a+5)(b+2)", None),
        ("1, 2", None),  # a bare list is several values (hedging), not a tuple
        (r"\{1, 2\}", None),
        (r"\left[ \frac{\pi^2}{8}, \frac{5 \pi^2}{4} \right]", None),  # closed ends not certainly distinct
    ],
)
def test_shapes(text: str, shape: str | None) -> None:
    assert compound_shape(text) == shape
    if shape:
        assert _parser_agrees(text)


def test_parser_reads_every_recognised_real_answer_the_same_way(shared_data: Path) -> None:
    texts = set()
    for line in (shared_data / "math" / "math500.test.jsonl").read_text().splitlines():
        row = json.loads(line)
        texts.add(row["answer"])
        found = extract(row["solution"])
        texts.update(found.answers if found else [])
    for name in ("math", "olympiadbench", "omnimath"):
        for item in json.loads((shared_data / "prm" / f"processbench_{name}.json").read_text()):
            found = extract("\n\n".join(item["steps"]))
            if found:
                texts.update(p for a in found.answers for p in (split_alternatives(a) or [a]))
    shaped = [body for t in texts if compound_shape(body := split_condition(unwrap(t))[0])]
    print(f"\ncompound shapes recognised without the parser: {len(shaped)} of {len(texts)} real answers")
    assert len(shaped) > 50
    assert [t for t in shaped if not _parser_agrees(t)] == []


@pytest.mark.parametrize("gold", ["25", r"\frac{20000}{\pi}", "2k+2", r"3\sqrt{5}"])
@pytest.mark.parametrize("answer", ["(8,-2)", r"\left( \frac{3}{2}, -13 \right)", r"(2,12) \cup (12,102)",
                                    r"\begin{pmatrix} -1/3 \\ 2/3 \end{pmatrix}", r"(-\infty, 0]"])
def test_fast_path_verdict_is_the_parsers(gold: str, answer: str) -> None:
    verdict = V.check(f"\\boxed{{{answer}}}", gold, OPTS)
    assert (verdict.status.value, verdict.score, verdict.details["method"]) == ("ok", 0.0, "symbolic")


def test_single_element_interval_still_equals_its_value() -> None:
    assert V.check(r"\boxed{[1,1]}", "1", OPTS).score == V.check(r"\boxed{\{1\}}", "1", OPTS).score


@pytest.mark.parametrize("gold", ["(8,-2)", r"(0,9) \cup (9,36)", r"\begin{pmatrix} -2 \\ -14 \\ -7 \end{pmatrix}"])
@pytest.mark.parametrize("answer", ["4", r"\frac{1}{2}", "0.5"])
def test_compound_gold_against_a_number(gold: str, answer: str) -> None:
    verdict = V.check(f"\\boxed{{{answer}}}", gold, OPTS)
    assert (verdict.status.value, verdict.score, verdict.details["method"]) == ("ok", 0.0, "symbolic")
