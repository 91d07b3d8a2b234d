"""Reading the tool calls a model made, from structured OpenAI ``tool_calls`` or from the raw text it generated.

Text formats, tried in this order on the text after the last ``</think>``:

- Hermes/Qwen blocks: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one call per block;
- JSON: an object or a list of calls, bare or in a code fence; ``{"name", "arguments"|"parameters"}``,
  ``{"function": {...}}``, ``{"tool_calls": [...]}`` and BFCL's own ``{"fn": {"arg": value}}``;
- Python call syntax as BFCL's prompt mode writes it, ``[f(a=1), mod.g(b="x")]``, read with ``ast`` (never
  evaluated): literals, negative numbers, plain arithmetic on numbers, a bare name read as its text as BFCL does.

Every bound is checked before the work it bounds, so a hostile output (megabytes, deep nesting, huge numbers) costs
a bounded, small amount of time and reads as malformed, never as a crash.
"""
from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 32  # nesting of argument values
MAX_CALLS = 64  # calls in one turn

_THINK_END = "</think>"
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}()]")
_CALL_START = re.compile(r"^\[?\s*[A-Za-z_][\w.]*\s*\(")


class Malformed(ValueError):
    """The output holds a call that cannot be read (bad JSON, an unsupported expression, a bound exceeded)."""


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]


@dataclass
class Parsed:
    """The calls of one assistant turn. ``format`` names where they came from; ``error`` is set when the turn tried
    to call (a tool-call block, a call-shaped text, a structured call) but could not be read."""

    calls: list[Call] = field(default_factory=list)
    format: str = "none"
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _depth_ok(value: Any, depth: int = 0) -> bool:
    if depth > MAX_DEPTH:
        return False
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else ()
    if depth == MAX_DEPTH and len(children):  # any child, scalar or not, would sit past the limit
        return False
    return all(_depth_ok(v, depth + 1) for v in children if isinstance(v, dict | list | tuple))


def _bracket_depth(text: str) -> int:
    """An upper bound of the nesting in ``text``, found before handing it to a recursive parser (brackets inside
    strings count too: the bound only has to be safe)."""
    opened = text.count("[") + text.count("{") + text.count("(")
    if opened <= MAX_DEPTH:
        return opened
    depth = best = 0
    for m in _BRACKET.finditer(text):
        if m.group() in "[{(":
            depth += 1
            best = max(best, depth)
        elif depth:
            depth -= 1
    return best


def _load_json(text: str) -> Any:
    if _bracket_depth(text) > MAX_DEPTH + 4:
        raise Malformed(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, int digit limit, nesting
        raise Malformed(f"invalid JSON: {exc}") from None


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    """Arguments as an object; OpenAI sends them as a JSON string, text formats as an object (or a string too)."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        raw = _load_json(raw)
    if not isinstance(raw, dict):
        raise Malformed(f"{where}: arguments must be an object, got {type(raw).__name__}")
    if not _depth_ok(raw):
        raise Malformed(f"{where}: arguments nested deeper than {MAX_DEPTH} levels")
    return raw


def _name(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise Malformed(f"{where}: the call has no function name")
    return raw.strip()


def call_from_object(obj: Any, where: str = "call") -> Call:
    """One call in any of the JSON shapes models and APIs write."""
    if not isinstance(obj, dict):
        raise Malformed(f"{where}: a call must be an object, got {type(obj).__name__}")
    if isinstance(obj.get("function"), dict):  # OpenAI: {"id", "type": "function", "function": {...}}
        obj = obj["function"]
        if "name" not in obj:
            raise Malformed(f"{where}: the call has no function name")
    if "name" in obj:
        args = obj.get("arguments", obj.get("parameters", obj.get("args")))
        return Call(_name(obj["name"], where), _arguments(args, where))
    if len(obj) == 1:  # BFCL's decoded form {"fn": {"arg": value}}
        (name, args), = obj.items()
        return Call(_name(name, where), _arguments(args, where))
    raise Malformed(f"{where}: no function name in {sorted(obj)[:5]}")


def calls_from_json(value: Any) -> list[Call]:
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    if len(items) > MAX_CALLS:
        raise Malformed(f"more than {MAX_CALLS} calls")
    return [call_from_object(item, f"call {i}") for i, item in enumerate(items)]


def parse_structured(tool_calls: Any) -> Parsed:
    """The ``tool_calls`` of an OpenAI assistant message."""
    if not isinstance(tool_calls, list):
        return Parsed(format="tool_calls", error="tool_calls must be a list")
    try:
        return Parsed(calls_from_json(tool_calls), "tool_calls")
    except Malformed as exc:
        return Parsed(format="tool_calls", error=str(exc))


# --- Python call syntax -------------------------------------------------------------------------------------------

_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _arithmetic(node: ast.BinOp, depth: int) -> Any:
    """Plain arithmetic on numbers (``1/3``, ``2**10``), which BFCL evaluates; bounded so it cannot explode."""
    op = _ARITHMETIC.get(type(node.op))
    left, right = _literal(node.left, depth + 1), _literal(node.right, depth + 1)
    if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
        return left + right  # both already in the (bounded) text
    if op is None or not (_number(left) and _number(right)):
        raise Malformed(f"unsupported expression {ast.unparse(node)[:80]!r}")
    if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
        raise Malformed(f"power too large in {ast.unparse(node)[:80]!r}")
    if isinstance(node.op, ast.Mult) and (abs(left) > 1e150 or abs(right) > 1e150):
        raise Malformed("product too large")
    try:
        return op(left, right)
    except (ArithmeticError, ValueError) as exc:
        raise Malformed(f"cannot compute {ast.unparse(node)[:80]!r}: {exc}") from None


def _literal(node: ast.expr, depth: int = 0) -> Any:
    """An argument value, the way BFCL's decoder reads it, for literal syntax only."""
    if depth > MAX_DEPTH:
        raise Malformed(f"argument nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _literal(node.operand, depth + 1)
        if not _number(value):
            raise Malformed(f"unsupported expression {ast.unparse(node)[:80]!r}")
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.List):
        return [_literal(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e, depth + 1) for e in node.elts)
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise Malformed("dict unpacking is not a literal")
            key = _literal(k, depth + 1)
            if not isinstance(key, str | int | float | bool | type(None) | tuple):
                raise Malformed("unhashable dict key")
            out[key] = _literal(v, depth + 1)
        return out
    if isinstance(node, ast.BinOp):
        return _arithmetic(node, depth)
    if isinstance(node, ast.Name):  # a variable: BFCL keeps its name as a string
        return node.id
    if isinstance(node, ast.Call):  # a nested call: its text, or {name: args} when it has keywords (as BFCL)
        if not node.keywords:
            return ast.unparse(node)
        return _py_call(node, depth + 1)
    if isinstance(node, ast.Subscript | ast.Lambda):  # kept as source text; BFCL's decoder fails on attributes
        return ast.unparse(node)
    raise Malformed(f"unsupported expression {type(node).__name__}")


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise Malformed(f"not a function name: {ast.unparse(node)[:80]!r}")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _py_call(node: ast.Call, depth: int = 0) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise Malformed("**kwargs is not a literal argument")
        args[kw.arg] = _literal(kw.value, depth + 1)
    return {_dotted(node.func): args}


def parse_python_calls(text: str) -> list[Call]:
    """``[f(a=1), g(b="x")]`` or a bare ``f(a=1)``; positional arguments are dropped, as BFCL's decoder does."""
    body = text.strip().strip("`\n ")
    if body.startswith("python\n"):
        body = body[len("python\n"):]
    body = body.strip().strip("'")
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    if _bracket_depth(body) > MAX_DEPTH + 4:
        raise Malformed(f"call nested deeper than {MAX_DEPTH} levels")
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Malformed(f"invalid call syntax: {exc}") from None
    nodes = tree.body.elts if isinstance(tree.body, ast.List | ast.Tuple) else [tree.body]
    if len(nodes) > MAX_CALLS:
        raise Malformed(f"more than {MAX_CALLS} calls")
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call):
            raise Malformed(f"not a function call: {ast.unparse(node)[:80]!r}")
        (name, args), = _py_call(node).items()
        calls.append(Call(name, args))
    return calls


# --- raw text ----------------------------------------------------------------------------------------------------

def _unfence(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1).strip() if m else text


def parse_text(text: str, max_chars: int) -> Parsed:
    """The calls in a generated string; no call found is not an error (the model answered in prose)."""
    if len(text) > max_chars:
        return Parsed(format="text", error=f"output of {len(text)} characters is over the {max_chars} read")
    if _THINK_END in text:
        text = text.rsplit(_THINK_END, 1)[1]
    text = text.strip()
    if "<tool_call>" in text:
        blocks = _TOOL_CALL_BLOCK.findall(text)
        if len(blocks) > MAX_CALLS:
            return Parsed(format="hermes", error=f"more than {MAX_CALLS} calls")
        try:
            calls = [c for i, b in enumerate(blocks) for c in calls_from_json(_load_json(_unfence(b.strip())))]
        except Malformed as exc:
            return Parsed(format="hermes", error=str(exc))
        return Parsed(calls, "hermes")
    body = _unfence(text)
    json_error = ""
    if body.startswith(("[", "{")):
        try:
            return Parsed(calls_from_json(_load_json(body)), "json")
        except Malformed as exc:
            json_error = str(exc)
            if body.startswith("{"):
                return Parsed(format="json", error=json_error)
    if _CALL_START.match(body):
        try:
            return Parsed(parse_python_calls(body), "python")
        except Malformed as exc:
            return Parsed(format="python", error=str(exc))
    if json_error:
        return Parsed(format="json", error=json_error)
    return Parsed(format="none")


# --- messages ----------------------------------------------------------------------------------------------------

def content_text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def assistant_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]


def parse_turn(message: dict[str, Any], max_chars: int) -> Parsed:
    """An assistant message: its structured ``tool_calls`` when it has any, else the calls written in its text."""
    if message.get("tool_calls"):
        return parse_structured(message["tool_calls"])
    return parse_text(content_text(message.get("content")), max_chars)
