"""Calls dispatched to BFCL's simulated API instances by name, never by ``eval``.

BFCL's executor prefixes each method name in the call text with an instance's global name and ``eval``s the string,
after a deny-list of a few names: call text then reaches every global of its module (``importlib``, ``json``, the
builtins). Here a call is data (a name and JSON-like arguments, from the ``tool_calls`` parser or from the
ground-truth text read with ``ast``): the name must be a public method of one of the task's classes, looked up in a
table built when the instances are made, and the arguments are passed as they are. Results and error texts are
BFCL's, so the response check compares the same strings it would.
"""
from __future__ import annotations

import ast
import copy
import functools
import inspect
import json
import keyword
import math
from dataclasses import dataclass, field
from typing import Any

from verifiers.kinds.bfcl.source import Task, api_class, stateless_classes
from verifiers.types import InvalidReference

ERROR = "Error during execution: "
# BFCL refuses these names before it evaluates a call, whatever class they would reach.
DENIED = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})
_PLAIN = (str, int, float, bool, type(None))


@dataclass
class Invocation:
    """One call: a method name, and its arguments (positional ones only from ground truth: BFCL's decoders drop a
    model's positional arguments)."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    args: tuple[Any, ...] = ()


def parse_ground_truth(text: str) -> Invocation:
    """A ground-truth call string (``mv(source='a', destination='b')``, ``sort('f.pdf')``): literals only."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a call of a plain name")
        args = tuple(ast.literal_eval(a) for a in node.args)
        kwargs = {str(k.arg): ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
        if len(kwargs) != len(node.keywords):
            raise ValueError("**kwargs")
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise InvalidReference(f"ground-truth call {text[:120]!r} is not a literal call: {exc}") from None
    return Invocation(node.func.id, kwargs, args)


@functools.cache
def public_methods(cls: type) -> tuple[str, ...]:
    """The names BFCL maps to an instance: its bound methods whose names do not start with ``_``."""
    instance = cls()
    return tuple(name for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod)
                 if not name.startswith("_"))


def _nonfinite(value: Any) -> str | None:
    """BFCL writes arguments back as ``repr`` text before ``eval``: ``inf`` and ``nan`` then read as unknown names."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf"
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            found = _nonfinite(item)
            if found:
                return found
    return None


def _plain(value: Any, depth: int = 0) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if depth > 64:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, _PLAIN) and _plain(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_plain(v, depth + 1) for v in value)
    return False


def _keyword_error(key: str) -> str | None:
    """The syntax error BFCL's ``eval`` meets for an argument name that is not a Python identifier."""
    if key.isidentifier() and not keyword.iskeyword(key):
        return None
    try:
        compile(f"f({key[:200]}=0)", "<string>", "eval")
    except SyntaxError as exc:
        return str(exc)
    return "invalid syntax (<string>, line 1)"


def format_result(result: Any) -> str:
    """A method's return value as BFCL's executor records it."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError, RecursionError):
            return str(result)
    return str(result)


class ApiSet:
    """The instances of one task's classes, loaded from its ``initial_config``, and the method table calls go
    through. Two of these make an episode: the model's and the ground truth's."""

    def __init__(self, task: Task) -> None:
        self.instances: dict[str, Any] = {}
        self._owner: dict[str, str] = {}
        stateless = stateless_classes()
        for name in task.involved_classes:
            cls = api_class(name)
            instance = cls()
            if name not in stateless:
                instance._load_scenario(copy.deepcopy(task.initial_config.get(name, {})),
                                        long_context=task.long_context)
            self.instances[name] = instance
            for method in public_methods(cls):
                self._owner[method] = name  # a later class wins a shared name, as in BFCL's table

    @property
    def method_names(self) -> list[str]:
        return list(self._owner)

    def call(self, call: Invocation) -> str:
        """Run one call and return its result or BFCL's error text; nothing but a listed method is reached."""
        name = call.name
        short = name.split(".")[1] if "." in name else name
        if short in DENIED:
            return f"{ERROR}Function call {short} is not allowed."
        owner = self._owner.get(name)
        if owner is None:
            head = name.split(".")[0]
            return f"{ERROR}name {head[:200]!r} is not defined"
        for key in call.kwargs:
            problem = _keyword_error(key)
            if problem:
                return ERROR + problem
        bad = _nonfinite(list(call.args) + list(call.kwargs.values()))
        if bad:
            return f"{ERROR}name {bad!r} is not defined"
        if not (_plain(call.args) and _plain(call.kwargs)):
            return f"{ERROR}arguments must be JSON-like values"
        method = getattr(self.instances[owner], name)
        try:  # BFCL records any exception of the call, or of writing its result as text, as the result
            return format_result(method(*call.args, **call.kwargs))
        except Exception as exc:
            return ERROR + str(exc)

    def execute(self, calls: list[Invocation]) -> list[str]:
        return [self.call(c) for c in calls]

    def state(self) -> dict[str, dict[str, Any]]:
        """The public attributes of every instance: what the state check compares."""
        return {name: {k: v for k, v in vars(inst).items() if not k.startswith("_")}
                for name, inst in self.instances.items()}


def state_differences(model: ApiSet, truth: ApiSet) -> dict[str, list[str]]:
    """BFCL's state check: per class, the public attributes of the ground-truth instance the model's differs on."""
    out: dict[str, list[str]] = {}
    for name, expected in truth.instances.items():
        actual = model.instances[name]
        differ = [attr for attr in vars(expected) if not attr.startswith("_")
                  and getattr(actual, attr, _MISSING) != getattr(expected, attr)]
        if differ:
            out[name] = differ
    return out


_MISSING = object()


def missing_results(model_results: list[str], truth_results: list[str]) -> list[str]:
    """BFCL's response check: the ground truth's results that the model's results so far do not hold, each model
    result used once, in any order."""
    pool = list(model_results)
    missing = []
    for item in truth_results:
        try:
            pool.remove(item)
        except ValueError:
            missing.append(item)
    return missing
