"""BFCL's Java and JavaScript rules in ``tool_calls``: agreement with BFCL's own ``ast_checker`` (its Java and
JavaScript languages) on candidates built from the possible answers of BFCL v4 simple_java and simple_javascript
(../shared/data/tools), written as the source text a function-calling model returns there, right and wrong; the
language named by the reference's BFCL id, or read from the docs as BFCL offers them (every type "string", the
declared type in a hint); and the readers' bounds on hostile text."""
from __future__ import annotations

import collections
import copy
import random
from pathlib import Path
from typing import Any

import pytest

from tests.support.bfcl_languages import LANGUAGE, mutations, oracle
from tests.support.tool_calls import as_hermes, bfcl_oracle, load_entries
from verifiers.kinds.tool_calls import ToolCallsVerifier
from verifiers.kinds.tool_calls import languages as L

V = ToolCallsVerifier()
OPTIONS = V.parse_options({})


@pytest.fixture(scope="module")
def tools_dir(shared_data: Path) -> Path:
    path = shared_data / "tools"
    if not (path / "BFCL_v4_simple_java.json").is_file():
        pytest.skip("BFCL Java/JavaScript data under ../shared/data/tools is absent")
    return path


def offered_docs() -> Any:
    """BFCL's own rewrite of the docs it offers a model in these categories."""
    try:
        from bfcl_eval.utils import _func_doc_language_specific_pre_processing
    except ImportError:
        return None
    return _func_doc_language_specific_pre_processing


@pytest.mark.parametrize("category", sorted(LANGUAGE))
def test_agreement_with_bfcls_checker(tools_dir: Path, category: str) -> None:
    if bfcl_oracle() is None:  # installs the stand-in for BFCL's model table
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    language = LANGUAGE[category]
    rewrite = offered_docs()
    rng = random.Random(0)
    total: collections.Counter[str] = collections.Counter()
    agree: collections.Counter[str] = collections.Counter()
    verdicts: set[tuple[str, bool]] = set()
    disagreements = []
    for entry in load_entries(tools_dir, category):
        references = {"by_id": {"calls": entry.ground_truth, "tools": entry.functions, "id": entry.id},
                      "named": {"calls": entry.ground_truth, "tools": entry.functions, "language": language}}
        if rewrite is not None:
            references["offered_docs"] = {"calls": entry.ground_truth,
                                          "tools": rewrite(copy.deepcopy(entry.functions), category)}
        for mutation, calls in mutations(entry, rng, language):
            want = oracle(entry, [{n: a} for n, a in calls], language)
            verdicts.add((mutation, want))
            for how, reference in references.items():
                got = V.check(as_hermes(calls), reference, OPTIONS).score == 1.0
                total[how] += 1
                if got == want:
                    agree[how] += 1
                elif len(disagreements) < 10:
                    disagreements.append((entry.id, mutation, how, want))
    for how in total:
        assert agree[how] / total[how] >= 0.99, (how, agree[how], total[how], disagreements)
    assert {m for m, want in verdicts if want} >= {"canonical"}
    assert {m for m, want in verdicts if not want} >= {"raw_value", "changed_text", "missing_arg", "extra_arg"}


def test_java_readers() -> None:
    assert L.java("42L", "long") == 42 and L.java("42", "long") == "42"
    assert L.java("1.5f", "float") == 1.5 and L.java("1.5", "float") == "1.5"
    assert L.java("true", "boolean") is True and L.java("True", "boolean") == "True"
    assert L.java('new ArrayList<>(Arrays.asList("a", "b"))', "ArrayList", "String") == ["a", "b"]
    assert L.java('new String[]{"a", "b"}', "Array", "String") == ['"a"', '"b"']  # BFCL keeps these quotes
    assert L.java('new HashMap<String, Object>() {{ put("k", 1); put("s", "v"); }}', "HashMap") == {"k": 1, "s": "v"}
    assert L.java("new HashMap<>()", "HashMap") == {}
    with pytest.raises(L.Unsupported):
        L.java("x", "Set")


def test_javascript_readers() -> None:
    assert L.js("'abc'", "String") == "abc" and L.js("abc", "String") == "abc"
    assert L.js("10n", "Bigint") == 10 and L.js("4.0", "float") == 4.0
    assert L.js("[1, 'two', true]", "array") == [1, "two", True]
    assert L.js("[[1, 2], [3, 4]]", "array") == [[1, 2], [3, 4]]
    # BFCL's object reader stops a nested object at its first "}" and keeps the rest as text: so does this one.
    assert L.js("{'a': 1, 'b': [1, 2], 'c': {'d': 'e'}}", "dict") == {"a": 1, "b": [1, 2], "c": "{'d': 'e"}


SOURCES = [
    "true", "false", "True", "42", "-7", "42L", "42l", "1.5", "1.5f", "3e3F", "-2.5e-3", "10n", "'x'", '"x"', "x",
    "", "'", "4.0", "1_000", "new int[]{1, 2, 3}", "new String[]{\"a\", \"b\"}", "new int[]{}",
    "new Object[]{1, \"a\", true}",
    'new ArrayList<>(Arrays.asList("a", "b"))', "new ArrayList<Integer>(Arrays.asList(1, 2))", "new ArrayList<>()",
    'new ArrayList<String>() {{ add("a"); add("b"); }}', 'new HashMap<String, Object>() {{ put("k", 1L); }}',
    'new HashMap<String, String>() {{ put("a", "b"); put("c", "d"); }}', "new HashMap<>()", "[1, 2, 3]",
    "['a', 'b']", "[]", "[[1, 2], [3, 4]]", "new Array(1, 2)", "new Array([1], [2])", "{}", "{'k': 'v', 'n': 2}",
    "{key: [1, 2], other: {a: 1}}", "{'a': true, 'b': 'c'}", "[1, 'two', true, 3.5]", "['a', \"b\"]",
]


@pytest.mark.parametrize("language", ["java", "javascript"])
def test_readers_match_bfcls_converters(language: str) -> None:
    """Every reader against BFCL's own converter, for every declared type, on source text models write."""
    try:
        if language == "java":
            from bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter import (
                java_type_converter as theirs,
            )
        else:
            from bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter import (
                js_type_converter as theirs,
            )
    except ImportError:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    table = L.types_of(language)
    compared = 0
    for declared in table:
        for nested in ([None, "String", "integer"] if declared in L.NESTED else [None]):
            for text in SOURCES:
                try:
                    want: Any = theirs(text, declared, nested) if nested else theirs(text, declared)
                except (NotImplementedError, ValueError):
                    want = "unsupported"
                try:
                    got: Any = L.convert(text, declared, nested, language)
                except L.Unsupported:
                    got = "unsupported"
                assert (type(got), got) == (type(want), want), (declared, nested, text)
                compared += 1
    assert compared > 300


def test_hostile_source_text_is_left_unread() -> None:
    """Text on which BFCL's backtracking readers would run for minutes stays text (and then fails its type)."""
    rows = "[" + "[a]," * 40 + "[a"
    assert L.js(rows, "array") == rows
    wide = "{" + "a," * 5000 + "}"
    assert L.js(wide, "dict") == wide
    long_list = "new ArrayList<>(Arrays.asList(" + "a," * 5000
    assert L.java(long_list, "ArrayList", "String") == long_list
    reference = {"calls": [{"f": {"x": [[1]]}}], "language": "javascript",
                 "tools": [{"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "array"}},
                                                        "required": ["x"]}}]}
    verdict = V.check('<tool_call>{"name": "f", "arguments": {"x": "' + rows + '"}}</tool_call>', reference, OPTIONS)
    assert verdict.score == 0.0


def test_call_text_values_are_source_text_in_java_and_javascript() -> None:
    """BFCL's prompt mode in these categories reads each value as its source text (a string literal without its
    quotes): ``success=true``, ``count=42`` and ``success="true"`` all reach the checker as text."""
    spec = [{"name": "FunGameBase.onFinish", "parameters": {"type": "dict", "properties": {
        "layout": {"type": "any"}, "success": {"type": "boolean"}, "count": {"type": "integer"}},
        "required": ["layout", "success"]}}]
    reference = {"calls": [{"FunGameBase.onFinish": {"layout": ["gameLayout"], "success": [True], "count": [42, ""]}}],
                 "tools": spec, "language": "java"}
    for text in ("[FunGameBase.onFinish(layout=gameLayout, success=true)]",
                 '[FunGameBase.onFinish(layout="gameLayout", success="true", count=42)]'):
        assert V.check(text, reference, OPTIONS).score == 1.0, text
    for text in ("[FunGameBase.onFinish(layout=gameLayout, success=True)]",  # Python's True is not Java's
                 "[FunGameBase.onFinish(layout=gameLayout, success=true, count=42.0)]"):
        assert V.check(text, reference, OPTIONS).score == 0.0, text
