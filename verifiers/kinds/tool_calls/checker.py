"""BFCL's AST rules for one set of calls against a reference, written from the rules of its ``ast_checker``.

A reference call is BFCL's possible answer ``{"fn": {"arg": [acceptable values...]}}``: ``""`` among the values
means the argument may be left out. Types come from the tool's spec when one is known:

- the name must match exactly; a dotted name may come back with its dots as underscores only from structured
  ``tool_calls`` (OpenAI-style APIs refuse dots, and BFCL then expects the underscored name) or when the tool specs
  the model was given spell it so;
- the spec's required arguments must be present, and no argument outside both the spec and the possible answer;
- an int passes where a float is expected (top level only, as in BFCL); a bool is never an int;
- strings compare after BFCL's normalisation (no spaces or ``,./-_*^``, lower case, ``'`` as ``"``), lists of
  strings element-wise after it, dicts key by key, lists of dicts dict by dict in order; other values by ``==``;
- a value of the possible answer's type where the spec says otherwise is a "variable" and compares exactly;
- parallel calls: the counts must be equal and every reference call must find its own output call, in any order,
  taken greedily in reference order (BFCL's matching, which partial credit replaces by a maximum matching).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from verifiers.kinds.tool_calls import languages
from verifiers.kinds.tool_calls.parse import Call

# Spec type names (BFCL's Python names, JSON-schema names, BFCL's Java/JavaScript names) -> the Python type of a value.
SPEC_TYPES: dict[str, type] = {
    "string": str, "str": str, "any": str, "String": str, "char": str, "Any": str,
    "integer": int, "int": int, "long": int, "short": int, "byte": int, "Bigint": int,
    "float": float, "number": float, "double": float,
    "boolean": bool, "bool": bool, "Boolean": bool,
    "array": list, "tuple": list, "list": list, "Array": list, "ArrayList": list, "Queue": list, "Stack": list,
    "dict": dict, "object": dict, "HashMap": dict, "Hashtable": dict,
}
_NESTED_CHECKED = ("array", "tuple")  # spec types whose items BFCL type-checks one level down
_STRIP = re.compile(r"[ ,./\-_*^]")


def _normalised(text: str) -> str:
    return _STRIP.sub("", text).lower().replace("'", '"')


_remembered = lru_cache(maxsize=8192)(_normalised)


def standardize(text: str) -> str:
    """BFCL's string normalisation. The acceptable values of a reference are compared with every output call and
    the same gold strings recur across a batch's rollouts, so short strings are remembered (a bounded cache: a
    long value, which a model may write, is never kept)."""
    return _remembered(text) if len(text) <= 256 else _normalised(text)


@dataclass
class FunctionSpec:
    properties: dict[str, Any]
    required: list[str]


def function_specs(tools: Any) -> dict[str, FunctionSpec]:
    """Tool specs by name, from OpenAI tools ``{"type": "function", "function": {...}}`` or BFCL's function docs."""
    specs: dict[str, FunctionSpec] = {}
    for tool in tools if isinstance(tools, list) else []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        params: dict[str, Any] = fn["parameters"] if isinstance(fn.get("parameters"), dict) else {}
        props: dict[str, Any] = params["properties"] if isinstance(params.get("properties"), dict) else {}
        required = params.get("required")
        specs[fn["name"]] = FunctionSpec(props, [r for r in required if isinstance(r, str)]
                                         if isinstance(required, list) else [])
    return specs


@dataclass
class Outcome:
    valid: bool
    error: str = ""
    kind: str = ""

    @classmethod
    def fail(cls, kind: str, error: str) -> Outcome:
        return cls(False, error[:300], kind)


OK = Outcome(True)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _first_type(answers: list[Any]) -> type | None:
    for answer in answers:
        if answer != "":
            return type(answer)
    return None


def _type_check(param: str, value: Any, answers: list[Any], expected: type, nested: type | None,
                answer_type: type | None) -> tuple[Outcome, bool]:
    """(outcome, is_variable), as BFCL's ``type_checker``; ``answer_type``: the answers' ``_first_type``."""
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return OK, is_variable
        items = value if isinstance(value, list) else []  # nested types are checked under array specs only
        for answer in answers:
            if not isinstance(answer, list) or all(
                    _type_check(param, item, answer, nested, None, _first_type(answer))[0].valid for item in items):
                return OK, is_variable
        return Outcome.fail("type_error:nested", f"items of {param!r} are not all {nested.__name__}"), is_variable
    if answer_type is not None and type(value) is answer_type:
        return OK, True
    return Outcome.fail("type_error:simple", f"{param!r} should be {expected.__name__}, got "
                                             f"{type(value).__name__} {_short(value)}"), is_variable


def _std(value: Any) -> Any:
    return standardize(value) if isinstance(value, str) else value


def _string_check(param: str, value: str, answers: list[Any]) -> Outcome:
    if standardize(value) in [standardize(a) for a in answers if isinstance(a, str)]:
        return OK
    return Outcome.fail("value_error:string", f"{param!r}: {_short(value)} is not one of {_short(answers)}")


def _list_check(param: str, value: list[Any], answers: list[Any]) -> Outcome:
    ours = [_std(v) for v in value]
    theirs = [[_std(a) for a in answer] for answer in answers if isinstance(answer, list | str)]
    if ours in theirs:
        return OK
    return Outcome.fail("value_error:list", f"{param!r}: {_short(value)} is not one of {_short(answers)}")


def _dict_check(param: str, value: dict[Any, Any], answers: list[Any]) -> Outcome:
    result = Outcome.fail("value_error:dict", f"{param!r}: no acceptable dict")
    for answer in answers:
        if answer == "" or not isinstance(answer, dict):
            continue
        unexpected = [k for k in value if k not in answer]
        if unexpected:
            result = Outcome.fail("value_error:dict_key", f"{param!r}: unexpected key {_short(unexpected[0])}")
            continue
        bad = [k for k, v in value.items() if _std(v) not in [_std(a) for a in _as_list(answer[k])]]
        if bad:
            result = Outcome.fail("value_error:dict_value", f"{param!r}: {bad[0]!r} = {_short(value[bad[0]])} is "
                                                            f"not one of {_short(answer[bad[0]])}")
            continue
        missing = [k for k, v in answer.items() if k not in value and "" not in _as_list(v)]
        if missing:
            result = Outcome.fail("value_error:dict_key", f"{param!r}: missing key {missing[0]!r}")
            continue
        return OK
    return result


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _list_dict_check(param: str, value: list[Any], answers: list[Any]) -> Outcome:
    result = Outcome.fail("value_error:list_dict", f"{param!r}: no acceptable list of dicts")
    for answer in answers:
        if not isinstance(answer, list | str) or len(answer) != len(value):
            result = Outcome.fail("value_error:list_dict_count", f"{param!r}: wrong number of dicts")
            continue
        for item, expected in zip(value, answer):
            result = _dict_check(param, item, [expected]) if isinstance(item, dict) else Outcome.fail(
                "value_error:list_dict", f"{param!r}: {_short(item)} is not a dict")
            if not result.valid:
                break
        else:
            return OK
    return result


def _value_check(param: str, value: Any, answers: list[Any], prop: dict[str, Any] | None,
                 language: str = "python") -> Outcome:
    """One argument against its acceptable values, typed by its spec entry when there is one."""
    if language != "python" and isinstance(prop, dict):
        read = source_value(param, value, prop, language)
        if isinstance(read, Outcome):
            return read
        source, source_type, item_type = read
        return _typed_value_check(param, source, answers, source_type, item_type, _first_type(answers))
    answer_type = _first_type(answers)
    declared = prop.get("type") if isinstance(prop, dict) else None
    expected = SPEC_TYPES.get(declared) if isinstance(declared, str) else None
    if expected is None:  # no usable spec: the possible answer's own type stands in for it
        expected = answer_type
        declared = None
    nested: type | None = None
    if declared in _NESTED_CHECKED and isinstance(prop, dict):
        items = prop.get("items")
        nested = SPEC_TYPES.get(items.get("type", "")) if isinstance(items, dict) else None
    if isinstance(value, tuple) and declared in ("tuple", None):  # JSON has no tuples: the answers hold lists
        value = list(value)
    if expected is float and type(value) is int:
        value = float(value)
    return _typed_value_check(param, value, answers, expected, nested, answer_type)


def source_value(param: str, value: Any, prop: dict[str, Any], language: str
                 ) -> Outcome | tuple[Any, type | None, type | None]:
    """A Java or JavaScript argument: source text read by its declared type (``languages``), with the Python types
    the value checks then compare it as."""
    table = languages.types_of(language)
    declared, item_type = languages.declared_types(prop, language)
    if not isinstance(declared, str) or declared not in table:
        return Outcome.fail("type_error:unsupported", f"{param!r}: BFCL has no {language} type {declared!r}")
    if type(value) is not str:
        kind = "type_error:java" if language == "java" else "type_error:js"
        return Outcome.fail(kind, f"{param!r} should be {language} source text, got {type(value).__name__} "
                                  f"{_short(value)}")
    item_type = item_type if declared in languages.NESTED else None
    if declared in languages.NESTED and item_type not in table:
        return Outcome.fail("type_error:unsupported", f"{param!r}: no {language} element type for {declared}")
    try:
        read = languages.convert(value, declared, item_type, language)
    except languages.Unsupported as exc:
        return Outcome.fail("type_error:unsupported", f"{param!r}: {exc}")
    return read, table[declared], table[item_type] if item_type else None


def _typed_value_check(param: str, value: Any, answers: list[Any], expected: type | None, nested: type | None,
                       answer_type: type | None) -> Outcome:
    is_variable = False
    if expected is not None:
        outcome, is_variable = _type_check(param, value, answers, expected, nested, answer_type)
        if not outcome.valid:
            return outcome
    if not is_variable:
        if expected is dict and isinstance(value, dict):
            return _dict_check(param, value, answers)
        if expected is list and nested is dict and isinstance(value, list):
            return _list_dict_check(param, value, answers)
        if expected is str and isinstance(value, str):
            return _string_check(param, value, answers)
        if expected is list and isinstance(value, list):
            return _list_check(param, value, answers)
    try:
        accepted = value in answers
    except TypeError:  # an unhashable oddity compared against something it cannot be: not accepted
        accepted = False
    if accepted:
        return OK
    return Outcome.fail("value_error:others", f"{param!r}: {_short(value)} is not one of {_short(answers)}")


def name_matches(expected: str, got: str, underscores: bool = False) -> bool:
    return got == expected or (underscores and "." in expected and got == expected.replace(".", "_"))


@dataclass
class ArgScores:
    """ToolRL-style components of one call against one reference call (names already matched)."""

    keys: float
    values: float


def check_call(call: Call, name: str, answers: dict[str, list[Any]], spec: FunctionSpec | None,
               underscores: bool = False, language: str = "python") -> Outcome:
    """One output call against one reference call, as BFCL's ``simple_function_checker``."""
    if not name_matches(name, call.name, underscores):
        return Outcome.fail("wrong_func_name", f"expected {name!r}, got {call.name!r}")
    arguments = call.arguments
    properties: dict[str, Any] = {}
    if spec is not None:
        properties = spec.properties
        for param in spec.required:
            if param not in arguments:
                return Outcome.fail("missing_required", f"missing required argument {param!r}")
    for param, value in arguments.items():
        acceptable = answers.get(param)
        if acceptable is None or (spec is not None and param not in properties):
            return Outcome.fail("unexpected_param", f"unexpected argument {param!r}")
        outcome = _value_check(param, value, acceptable, properties.get(param), language)
        if not outcome.valid:
            return outcome
    for param, values in answers.items():
        if param not in arguments and "" not in values:
            return Outcome.fail("missing_optional", f"missing argument {param!r} (no default is acceptable)")
    return OK


def arg_scores(call: Call, answers: dict[str, list[Any]], spec: FunctionSpec | None, language: str = "python"
               ) -> ArgScores:
    given, wanted = set(call.arguments), set(answers)
    union = given | wanted
    keys = len(given & wanted) / len(union) if union else 1.0
    properties = spec.properties if spec else {}
    right = sum(1 for p in given & wanted
                if _value_check(p, call.arguments[p], answers[p], properties.get(p), language).valid)
    right += sum(1 for p in wanted - given if "" in answers[p])
    values = right / len(union) if union else 1.0
    return ArgScores(keys, values)


@dataclass
class RefCall:
    name: str
    answers: dict[str, list[Any]]  # every argument's acceptable values as a list, a single value wrapped


@dataclass
class Matching:
    """The outcome of a set of output calls against a set of reference calls."""

    accepted: bool  # BFCL's verdict
    reason: str
    pairs: list[dict[str, Any]] = field(default_factory=list)  # per reference call
    matched: int = 0  # maximum bipartite matching of fully correct calls
    components: dict[str, float] = field(default_factory=dict)


def _max_matching(edges: list[list[int]], n_right: int) -> int:
    """Size of a maximum bipartite matching (augmenting paths; at most 64 x 64 calls)."""
    owner = [-1] * n_right

    def augment(left: int, seen: list[bool]) -> bool:
        for right in edges[left]:
            if not seen[right]:
                seen[right] = True
                if owner[right] == -1 or augment(owner[right], seen):
                    owner[right] = left
                    return True
        return False

    return sum(augment(left, [False] * n_right) for left in range(len(edges)))


def match_calls(calls: list[Call], refs: list[RefCall], specs: dict[str, FunctionSpec],
                structured: bool = False, language: str = "python") -> Matching:
    """``structured``: the calls came as API ``tool_calls``, where a dotted name must come back underscored.
    ``language``: BFCL's Java or JavaScript rules (arguments as source text) instead of Python's."""
    loose = {r.name: structured or r.name.replace(".", "_") in specs for r in refs}
    memo: dict[tuple[int, int], Outcome] = {}

    def outcome(i: int, j: int) -> Outcome:
        if (i, j) not in memo:
            r = refs[i]
            memo[i, j] = check_call(calls[j], r.name, r.answers, specs.get(r.name) or _dotless(specs, r.name),
                                    loose[r.name], language)
        return memo[i, j]

    # BFCL: equal counts, then each reference call takes the first output call left that it accepts.
    taken: set[int] = set()
    picks: list[int | None] = []
    pairs: list[dict[str, Any]] = []
    failure = ""
    for i, ref in enumerate(refs):
        index = next((j for j in range(len(calls)) if j not in taken and outcome(i, j).valid), None)
        picks.append(index)
        if index is not None:
            taken.add(index)
            pairs.append({"reference": ref.name, "call": index, "ok": True})
            continue
        near = _nearest(calls, ref.name, taken, loose[ref.name])
        error = outcome(i, near).error if near is not None else "no call left to match"
        pairs.append({"reference": ref.name, "call": near, "ok": False, "error": error})
        failure = failure or f"{ref.name}: {error}"
    if len(calls) != len(refs):
        accepted, reason = False, f"{len(calls)} calls where {len(refs)} are expected"
    else:
        accepted, reason = not failure, failure or "every call matches"
    if len(taken) == min(len(calls), len(refs)):  # greedy already pairs as many as can be
        matched = len(taken)
    else:
        edges = [[j for j in range(len(calls)) if outcome(i, j).valid] for i in range(len(refs))]
        matched = _max_matching(edges, len(calls))
    return Matching(accepted, reason, pairs, matched, _components(calls, refs, specs, loose, picks, language))


def _dotless(specs: dict[str, FunctionSpec], name: str) -> FunctionSpec | None:
    return specs.get(name.replace(".", "_"))


def _nearest(calls: list[Call], name: str, taken: set[int], underscores: bool) -> int | None:
    """The output call a failed reference call is reported against: one of its name if any, else any left."""
    free = [j for j in range(len(calls)) if j not in taken]
    named = [j for j in free if name_matches(name, calls[j].name, underscores)]
    return (named or free)[0] if named or free else None


def _components(calls: list[Call], refs: list[RefCall], specs: dict[str, FunctionSpec], loose: dict[str, bool],
                picks: list[int | None], language: str = "python") -> dict[str, float]:
    """ToolRL-style partial signals: function names (multiset overlap), then argument keys and values of the calls
    paired by name, each over the larger of the two call counts. Calls BFCL's matching accepted keep their
    reference; each other reference takes the best-scoring call of its name among those left."""
    size = max(len(calls), len(refs))
    if size == 0:
        return {"names": 1.0, "argument_keys": 1.0, "values": 1.0}
    free = [j for j in range(len(calls)) if j not in picks]
    names = keys = values = 0.0
    for ref, right in zip(refs, picks):
        if right is not None:  # a correct call: every value right, keys as many as it gave of those allowed
            wanted = len(ref.answers)
            names += 1
            keys += len(calls[right].arguments) / wanted if wanted else 1.0
            values += 1.0
    for ref, right in zip(refs, picks):
        if right is not None:
            continue
        spec = specs.get(ref.name) or _dotless(specs, ref.name)
        candidates = [(arg_scores(calls[j], ref.answers, spec, language), j) for j in free
                      if name_matches(ref.name, calls[j].name, loose[ref.name])]
        if not candidates:
            continue
        scores, j = max(candidates, key=lambda c: (c[0].values, c[0].keys, -c[1]))
        free.remove(j)
        names += 1
        keys += scores.keys
        values += scores.values
    return {"names": names / size, "argument_keys": keys / size, "values": values / size}
