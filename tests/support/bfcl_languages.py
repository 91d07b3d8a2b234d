"""Candidates for BFCL's Java and JavaScript categories, made from their possible answers: every argument written
as the source text a function-calling model returns there (BFCL offers those tools with every parameter typed
string), right and wrong, and BFCL's ``ast_checker`` with its Java/JavaScript language as the oracle."""
from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from tests.support.tool_calls import Calls, Entry, canonical

LANGUAGE = {"simple_java": "java", "simple_javascript": "javascript"}


def _java_scalar(value: Any, declared: str | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if declared == "long" and isinstance(value, int):
        return f"{value}L"
    if declared == "float" and isinstance(value, int | float):
        return f"{float(value)}f"
    if isinstance(value, str) and declared not in ("String", "any", "char", None):
        return value  # a variable name where a typed value is due
    return json.dumps(value) if declared is None and isinstance(value, str) else str(value)


def java_text(value: Any, prop: dict[str, Any]) -> str:
    declared = prop.get("type")
    item = (prop.get("items") or {}).get("type")
    if declared == "ArrayList" and isinstance(value, list):
        return "new ArrayList<>(Arrays.asList(" + ", ".join(
            json.dumps(v) if isinstance(v, str) else _java_scalar(v, item) for v in value) + "))"
    if declared == "Array" and isinstance(value, list):
        return f"new {item or 'Object'}[]{{" + ", ".join(_java_scalar(v, item) for v in value) + "}"
    if declared == "HashMap" and isinstance(value, dict):
        puts = " ".join(f'put("{k}", {json.dumps(v) if isinstance(v, str) else _java_scalar(v, None)});'
                        for k, v in value.items())
        return "new HashMap<String, Object>() {{ " + puts + " }}"
    return _java_scalar(value, declared)


def js_text(value: Any, prop: dict[str, Any]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(f"'{v}'" if isinstance(v, str) else js_text(v, {}) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"'{k}': " + (f"'{v}'" if isinstance(v, str) else js_text(v, {}))
                               for k, v in value.items()) + "}"
    if prop.get("type") == "Bigint" and isinstance(value, int):
        return f"{value}n"
    return str(value)


def as_source(entry: Entry, calls: Calls, language: str) -> Calls:
    out: Calls = []
    for name, args in calls:
        spec = next((f for f in entry.functions if f["name"] == name), entry.functions[0])
        props = spec["parameters"].get("properties", {})
        write = java_text if language == "java" else js_text
        out.append((name, {k: write(v, props.get(k, {})) for k, v in args.items()}))
    return out


def mutations(entry: Entry, rng: random.Random, language: str) -> Iterator[tuple[str, Calls]]:
    base = canonical(entry, rng)
    source = as_source(entry, base, language)
    yield "canonical", source
    yield "second_value", as_source(entry, canonical(entry, rng, pick=1), language)
    yield "omit_optional", as_source(entry, canonical(entry, rng, omit_optional=True), language)
    name, args = source[0]
    raw_name, raw_args = base[0]
    if not args:
        return
    p = rng.choice(sorted(args))
    yield "raw_value", [(name, {**args, p: raw_args[p]})]  # a JSON value where source text is due
    yield "quoted", [(name, {**args, p: json.dumps(args[p])})]
    yield "changed_text", [(name, {**args, p: args[p] + "1"})]
    yield "missing_arg", [(name, {k: v for k, v in args.items() if k != p})]
    yield "extra_arg", [(name, {**args, "unexpected": "1"})]
    for k, v in raw_args.items():
        if isinstance(v, bool):
            yield "bool_capitalised", [(name, {**args, k: str(v)})]
        if isinstance(v, int) and not isinstance(v, bool):
            yield "int_text_plain", [(name, {**args, k: str(v)})]
            yield "int_as_float_text", [(name, {**args, k: f"{v}.0"})]
        if isinstance(v, float):
            yield "float_text_plain", [(name, {**args, k: repr(v)})]
        if isinstance(v, list) and len(v) > 1:
            yield "list_reordered", [(name, {**args, k: as_source(entry, [(raw_name, {k: list(reversed(v))})],
                                                                    language)[0][1][k]})]
        if isinstance(v, dict) and v:
            first = next(iter(v))
            yield "dict_key_dropped", [(name, {**args, k: as_source(
                entry, [(raw_name, {k: {a: b for a, b in v.items() if a != first}})], language)[0][1][k]})]


def oracle(entry: Entry, output: list[dict[str, Any]], language: str) -> bool:
    """BFCL's ``ast_checker`` in the entry's language (``tests.support.tool_calls.bfcl_oracle`` installs the stand-in
    for its model table first)."""
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    lang = Language.JAVA if language == "java" else Language.JAVASCRIPT
    try:
        result = ast_checker(entry.functions, output, entry.ground_truth, lang, entry.category, "prompt/model")
    except (NotImplementedError, ValueError, KeyError):  # a type BFCL's converters do not read: it fails
        return False
    return bool(result["valid"])
