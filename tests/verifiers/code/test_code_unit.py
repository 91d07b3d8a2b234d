"""Code verifier pieces that need no sandbox: extraction, stdout comparison, reference plans, the wire format."""
from __future__ import annotations

import math

import pytest

from sandbox.inside.harness import RemoteRef, from_wire, to_wire
from verifiers.kinds.code.extract import extract_program
from verifiers.kinds.code.plan import build_plan
from verifiers.kinds.code.stdio import outputs_match
from verifiers.kinds.code.verifier import assemble_program
from verifiers.types import InvalidReference


def test_last_fenced_block_of_the_language_wins() -> None:
    text = ("First try:\n```python\ndef f(): return 1\n```\nrun it:\n```bash\npython f.py\n```\n"
            "better:\n```py\ndef f(): return 2\n```\n")
    got = extract_program(text)
    assert got is not None and got.code == "def f(): return 2\n" and got.source == "fenced:python"


def test_untagged_fence_then_whole_text_then_nothing() -> None:
    assert extract_program("```\nprint(1)\n```").source == "fenced"
    whole = extract_program("def f():\n    return 1\n")
    assert whole is not None and whole.source == "whole_text"
    assert extract_program("   \n") is None
    assert extract_program("```bash\nls\n```") is None  # only another language's block
    assert extract_program("```python\n\n```") is None


def test_unclosed_fence_runs_to_the_end_and_other_languages_resolve_aliases() -> None:
    cut = extract_program("Here:\n```python\ndef f():\n    return 3")
    assert cut is not None and "return 3" in cut.code
    cpp = extract_program("```c++\nint main(){}\n```\n```python\nx=1\n```", "cpp")
    assert cpp is not None and cpp.code.startswith("int main") and cpp.source == "fenced:cpp"


@pytest.mark.parametrize(
    ("got", "expected", "mode", "ok"),
    [
        ("1 2\r\n3  \n\n", "1 2\n3\n", "exact", True),
        ("1  2\n3", "1 2\n3", "exact", False),
        ("1  2\n3", "1 2 3", "tokens", True),
        ("1 2", "1 2 3", "tokens", False),
        ("0.3333333", "0.33333333", "float", True),
        ("0.34", "0.33", "float", False),
        ("YES 1.0", "YES 1", "float", True),
        ("NO 1.0", "YES 1", "float", False),
        ("nan", "nan", "float", True),  # identical tokens
    ],
)
def test_outputs_match(got: str, expected: str, mode: str, ok: bool) -> None:
    assert outputs_match(got, expected, mode) is ok


def test_float_tolerance_is_configurable() -> None:
    assert outputs_match("1.01", "1.0", "float", 0.05)
    assert not outputs_match("1.01", "1.0", "float", 1e-6)


def test_plans_count_tests_and_validate() -> None:
    plan = build_plan({"test": "def check(candidate):\n    assert True\n    x = 2\n    assert candidate(x) == 3\n"
                               "    for i in range(3):\n        assert candidate(i) == i + 1\n", "entry_point": "f"})
    assert plan.kind == "function" and plan.count == 2  # `assert True` is not a test
    mb = build_plan({"test_list": ["assert f(1) == 2", "assert f(2) == 3"], "weights": [1, 3]})
    assert mb.count == 2 and mb.weights == [1.0, 3.0]
    io = build_plan({"cases": [{"input": "1", "output": "2"}], "compare": "float", "language": "C++"})
    assert io.kind == "stdio" and io.language == "c++"


@pytest.mark.parametrize(
    "reference",
    [
        "assert f(1) == 2",
        {"test": "def check(c): assert c(", "entry_point": "f"},
        {"test": "def helper(c): pass", "entry_point": "f"},
        {"test": "def check(c): assert c()", "entry_point": "not a name"},
        {"test_list": []},
        {"test_list": ["assert f(1) == 2"], "weights": [1, 2]},
        {"test_list": ["assert f(1) == 2"], "weights": [-1]},
        {"test_list": ["assert f(1) == 2"], "language": "cpp"},
        {"cases": [{"input": "1"}]},
        {"cases": [{"input": "1", "output": "1"}], "compare": "fuzzy"},
        {"test_list": ["assert f(1) == 2"], "cases": [{"input": "", "output": ""}]},
        {"test_list": ["assert f(1) == 2"], "timeout_s": 0},
        {"test_list": ["break"]},  # parses, but does not compile
        {"test_list": ["assert f(1) == 2"], "test_setup_code": "nonlocal x"},
        {"test": "def check(c):\n    assert c(1)\nyield 1\n", "entry_point": "f"},
        {"test_list": ["assert " + "-" * 20000 + "1"]},  # the parser's stack: MemoryError
        {"test_list": ["assert " + "+".join(["1"] * 100000)]},  # RecursionError building the tree
        {"test_list": ["assert f(1) == 2"], "test_setup_code": "x = 1\0"},  # a NUL: ValueError
        {"test": "def check(c):\n    assert " + "not " * 20000 + "c\n", "entry_point": "f"},
    ],
)
def test_bad_references_are_named(reference: object) -> None:
    with pytest.raises(InvalidReference):
        build_plan(reference)


def test_wire_round_trips_plain_values_and_refuses_objects() -> None:
    value = {(1, "a"): [1.5, float("inf"), None, True], "s": {1, 2}, "f": frozenset({3}), "b": b"\x00",
             "c": 1 + 2j, "big": 10**40, "neg": -(10**30), "t": (), "int": int}
    back = from_wire(to_wire(value), lambda rid: pytest.fail("no refs here"))
    assert back == value and type(back[(1, "a")]) is list and type(back["s"]) is set
    assert math.isinf(back[(1, "a")][1])
    with pytest.raises(TypeError):
        to_wire(object())


def test_candidate_side_turns_impostors_into_plain_data_or_handles() -> None:
    class Liar(list):
        def __eq__(self, other: object) -> bool:
            return True

    class Opaque:
        def __eq__(self, other: object) -> bool:
            return True

    kept: list[object] = []
    wire = to_wire([Liar([1]), Opaque()], lambda obj: kept.append(obj) or len(kept))
    assert wire == [[1], {"$r": 1}]

    class Conn:
        generation = 1

    decoded = from_wire(wire, lambda rid: RemoteRef(Conn(), rid, "x"))
    assert type(decoded[0]) is list and decoded[0] != [2]
    assert decoded[1] != 5 and 5 != decoded[1] and decoded[1] != decoded[1].__class__  # handles equal nothing


def test_plans_are_kept_by_reference_and_refusals_are_not() -> None:
    reference = {"test_list": ["assert f(1) == 2", "assert f(2) == 3"]}
    first = build_plan(reference)
    assert build_plan(dict(reversed(list(reference.items())))) is first  # the same reference, keys in another order
    assert build_plan({"test_list": ["assert f(1) == 2"]}) is not first
    for _ in range(2):  # a refusal is raised every time, never remembered as a plan
        with pytest.raises(InvalidReference):
            build_plan({"test_list": ["assert f(1) =="]})


def test_a_program_the_parser_refuses_is_assembled_as_it_is() -> None:
    """The program is the policy's: one nested past the parser's limits must not raise on the host (it is run, and
    fails to compile in the sandbox), whatever the parser raises for it."""
    plan = build_plan({"test": "def check(c):\n    assert c(1) == 2\n", "entry_point": "f", "prompt": "def f(x):\n"})
    for program in ("return " + "-" * 20000 + "1", "return " + "+".join(["1"] * 100000), "return 1\0"):
        assert assemble_program(plan, program).endswith(program)
