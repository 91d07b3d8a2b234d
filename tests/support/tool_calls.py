"""Shared pieces of the tool-call tests and benchmark: BFCL entries, candidate outputs made from their possible answers
(right ones and plausible mistakes), the three ways a model writes them, and BFCL's own checker as the oracle."""
from __future__ import annotations

import json
import random
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
Calls = list[tuple[str, dict[str, Any]]]


@dataclass
class Entry:
    id: str
    category: str
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]]


@dataclass
class Candidate:
    entry: Entry
    mutation: str
    calls: Calls | None  # None: the model answered in prose


def load_entries(tools_dir: Path, category: str) -> list[Entry]:
    questions = [json.loads(line) for line in (tools_dir / f"BFCL_v4_{category}.json").open()]
    answers_path = tools_dir / "possible_answer" / f"BFCL_v4_{category}.json"
    answers = {a["id"]: a["ground_truth"] for a in map(json.loads, answers_path.open())} if answers_path.exists() \
        else {}
    return [Entry(q["id"], category, q["function"], answers.get(q["id"], [])) for q in questions]


def _first_value(values: list[Any]) -> tuple[bool, Any]:
    for v in values:
        if v != "":
            return True, v
    return False, None


def canonical(entry: Entry, rng: random.Random, omit_optional: bool = False, pick: int = 0) -> Calls:
    out: Calls = []
    for gt in entry.ground_truth:
        (name, params), = gt.items()
        args = {}
        for p, values in params.items():
            present = [v for v in values if v != ""]
            if not present or (omit_optional and "" in values):
                continue
            args[p] = _concrete(present[min(pick, len(present) - 1)])
        out.append((name, args))
    return out


def _concrete(value: Any) -> Any:
    """A value from a possible answer: nested dicts list acceptable values per key, as the top level does."""
    if isinstance(value, dict):
        out = {}
        for k, values in value.items():
            present = [v for v in values if v != ""] if isinstance(values, list) else [values]
            if present:
                out[k] = _concrete(present[0])
        return out
    if isinstance(value, list):
        return [_concrete(v) if isinstance(v, dict) else v for v in value]
    return value


def _spec(entry: Entry, name: str) -> dict[str, Any]:
    return next((f for f in entry.functions if f["name"] == name), entry.functions[0])


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + " extra"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["x"]
    if isinstance(value, dict):
        return {**value, "unexpected_key": 1}
    return "x"


def _normalised(value: str) -> str:
    """What BFCL's string normalisation forgives: case, spaces and ``,./-_*^``."""
    return value.upper().replace(" ", "_") if " " in value else value.upper() + "."


def mutations(entry: Entry, rng: random.Random) -> Iterator[tuple[str, Calls | None]]:
    base = canonical(entry, rng)
    yield "canonical", base
    if entry.category == "irrelevance":
        fn = entry.functions[0]
        props = fn["parameters"].get("properties", {})
        args = {p: _sample(s) for p, s in props.items() if p in fn["parameters"].get("required", [])}
        yield "prose", None
        yield "call_anyway", [(fn["name"], args)]
        yield "empty_list", []
        return
    yield "prose", None
    yield "second_value", canonical(entry, rng, pick=1)
    yield "omit_optional", canonical(entry, rng, omit_optional=True)
    if len(base) > 1:
        yield "reversed", list(reversed(base))
        yield "shuffled", rng.sample(base, len(base))
        yield "dropped_call", base[:-1]
    yield "duplicated_call", [*base, base[0]]
    i = rng.randrange(len(base))
    name, args = base[i]
    spec = _spec(entry, name)
    props = spec["parameters"].get("properties", {})
    if args:
        p = rng.choice(sorted(args))
        yield "wrong_value", _replace(base, i, name, {**args, p: _wrong(args[p])})
        yield "missing_arg", _replace(base, i, name, {k: v for k, v in args.items() if k != p})
        for q, v in args.items():
            if isinstance(v, str) and v.strip():
                yield "string_normalised", _replace(base, i, name, {**args, q: _normalised(v)})
                break
        for q, v in args.items():
            t = props.get(q, {}).get("type")
            if t == "float" and isinstance(v, float) and v.is_integer():
                yield "int_for_float", _replace(base, i, name, {**args, q: int(v)})
            if t == "integer" and isinstance(v, int) and not isinstance(v, bool):
                yield "float_for_int", _replace(base, i, name, {**args, q: float(v)})
            if t in ("array", "tuple") and isinstance(v, list) and len(v) > 1:
                yield "list_reordered", _replace(base, i, name, {**args, q: list(reversed(v))})
    yield "extra_arg", _replace(base, i, name, {**args, "unexpected_arg": 1})
    others = [f["name"] for f in entry.functions if f["name"] != name]
    yield "wrong_function", _replace(base, i, others[0] if others else name + "_v2", args)
    if any("." in n for n, _ in base):  # as an API that refuses dots returns every call
        yield "underscored_name", [(n.replace(".", "_"), a) for n, a in base]


def _replace(calls: Calls, i: int, name: str, args: dict[str, Any]) -> Calls:
    return [*calls[:i], (name, args), *calls[i + 1:]]


def _sample(spec: dict[str, Any]) -> Any:
    return {"integer": 3, "float": 2.5, "boolean": True, "array": [1], "dict": {}}.get(spec.get("type", ""), "x")


def candidates(entries: list[Entry], seed: int = 0) -> list[Candidate]:
    rng = random.Random(seed)
    return [Candidate(e, m, c) for e in entries for m, c in mutations(e, rng)]


# --- how a model writes them --------------------------------------------------------------------------------------

def as_python(calls: Calls) -> str:
    return "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in calls) + "]"


def as_hermes(calls: Calls) -> str:
    return "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls)


def as_messages(entry: Entry, calls: Calls | None) -> list[dict[str, Any]]:
    question = entry_question(entry)
    if calls is None:
        return [question, {"role": "assistant", "content": "I cannot help with that using these tools."}]
    tool_calls = [{"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                  for i, (n, a) in enumerate(calls)]
    return [question, {"role": "assistant", "content": None, "tool_calls": tool_calls}]


def entry_question(entry: Entry) -> dict[str, Any]:
    return {"role": "user", "content": f"Question of {entry.id}"}


PROSE = "I'm sorry, none of the available functions can answer that."


def render(calls: Calls | None, how: str) -> str:
    if calls is None:
        return PROSE
    return as_python(calls) if how == "python" else as_hermes(calls)


def decoded(calls: Calls | None) -> list[dict[str, Any]]:
    """What BFCL's decoders hand its checker (JSON round trip, as both the FC and the prompt paths yield)."""
    return [{n: json.loads(json.dumps(a))} for n, a in calls or []]


def decoded_python(calls: Calls | None) -> list[dict[str, Any]]:
    """The prompt-mode decoder keeps Python values (tuples stay tuples)."""
    return [{n: dict(a)} for n, a in calls or []]


# --- BFCL's checker ------------------------------------------------------------------------------------------------

class _ModelConfig:
    def __init__(self, underscore_to_dot: bool) -> None:
        self.underscore_to_dot = underscore_to_dot


Oracle = Callable[[Entry, list[dict[str, Any]], bool], bool]


def bfcl_oracle() -> Oracle | None:
    """BFCL's own ``ast_checker`` when bfcl-eval is installed (``pip install --no-deps bfcl-eval``). Its model table
    imports every provider SDK, so a two-entry stand-in replaces it: a prompt-mode model that keeps dotted names and
    a function-calling model whose API turns dots into underscores (the oracle's last argument picks it)."""
    try:
        if "bfcl_eval.constants.model_config" not in sys.modules:
            stand_in = types.ModuleType("bfcl_eval.constants.model_config")
            stand_in.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
                "prompt/model": _ModelConfig(False), "fc/model": _ModelConfig(True)}
            sys.modules["bfcl_eval.constants.model_config"] = stand_in
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    except ImportError:
        return None

    def check(entry: Entry, output: list[dict[str, Any]], fc: bool = False) -> bool:
        if entry.category == "irrelevance":
            return not output  # BFCL's relevance rule: no decodable call
        if not output:
            return False
        result = ast_checker(entry.functions, output, entry.ground_truth, Language.PYTHON, entry.category,
                             "fc_model" if fc else "prompt_model")
        return bool(result["valid"])

    return check
