"""BFCL's own simulated APIs, function docs and multi-turn tasks, read from the installed ``bfcl-eval`` wheel.

``bfcl-eval`` is an optional extra (``pip install --no-deps bfcl-eval``: its declared dependencies pull a vLLM-era
stack that the simulated classes do not use). Only its light modules are imported here (the class sources, the
backend table and the data files); its model handlers and AST checker import hosted-model SDKs and are never touched.
"""
from __future__ import annotations

import copy
import functools
import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifiers.types import InvalidReference, VerifierUnavailable

INSTALL_HINT = "the bfcl extra is not installed: pip install --no-deps bfcl-eval (and mpmath)"

# BFCL's MAXIMUM_STEP_LIMIT: its inference loop force-quits a turn once more than this many steps have executed.
STEP_LIMIT = 20
CATEGORIES = ("multi_turn_base", "multi_turn_long_context", "multi_turn_miss_func", "multi_turn_miss_param")
# The classes a multi-turn task may involve; the memory and web-search classes of BFCL's agentic categories are not
# multi-turn tasks (they write files or reach the network) and are refused.
CLASSES = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI",
           "VehicleControlAPI")


@functools.cache
def _package_dir() -> Path:
    try:
        backend = importlib.import_module("bfcl_eval.constants.executable_backend_config")
    except ImportError as exc:
        raise VerifierUnavailable(f"{INSTALL_HINT} ({exc})") from None
    return Path(str(backend.__file__)).resolve().parents[1]


def available() -> bool:
    try:
        _package_dir()
    except VerifierUnavailable:
        return False
    return True


@functools.cache
def api_class(name: str) -> type:
    """One of BFCL's simulated API classes, by the name tasks use in ``involved_classes``."""
    if name not in CLASSES:
        raise InvalidReference(f"unknown BFCL class {name[:80]!r}; known: {', '.join(CLASSES)}")
    _package_dir()
    backend = importlib.import_module("bfcl_eval.constants.executable_backend_config")
    try:
        module = importlib.import_module(backend.CLASS_FILE_PATH_MAPPING[name])
    except ImportError as exc:  # mpmath for MathAPI
        raise VerifierUnavailable(f"BFCL class {name} cannot be imported: {exc}") from None
    cls: type = getattr(module, name)
    return cls


@functools.cache
def stateless_classes() -> frozenset[str]:
    _package_dir()
    backend = importlib.import_module("bfcl_eval.constants.executable_backend_config")
    return frozenset(backend.STATELESS_CLASSES)


@functools.cache
def _class_docs(name: str) -> tuple[dict[str, Any], ...]:
    backend = importlib.import_module("bfcl_eval.constants.executable_backend_config")
    path = _package_dir() / "data" / "multi_turn_func_doc" / backend.MULTI_TURN_FUNC_DOC_FILE_MAPPING[name]
    return tuple(json.loads(line) for line in path.read_text().splitlines() if line.strip())


@dataclass
class Task:
    """One multi-turn episode: the scenario, the user turns and the ground-truth calls of each turn."""

    id: str
    initial_config: dict[str, Any]
    involved_classes: list[str]
    question: list[list[dict[str, Any]]]
    ground_truth: list[list[str]]
    missed_function: dict[str, list[str]] = field(default_factory=dict)
    long_context: bool = False

    def functions(self, turn: int) -> list[dict[str, Any]]:
        """The function docs offered at ``turn``, as BFCL builds them: every function of the involved classes, less
        those withheld until a later turn (miss_func)."""
        withheld = {name for t, names in self.missed_function.items() if int(t) > turn for name in names}
        docs = [copy.deepcopy(d) for c in self.involved_classes for d in _class_docs(c)]
        return [d for d in docs if d["name"] not in withheld]

    def added_functions(self, turn: int) -> list[str]:
        """The names of the functions that become available at ``turn`` (miss_func's held-out turn)."""
        return list(self.missed_function.get(str(turn), []))


def _category(task_id: str) -> str:
    return task_id.rsplit("_", 1)[0]


@functools.cache
def _tasks(category: str) -> dict[str, tuple[dict[str, Any], list[list[str]]]]:
    data = _package_dir() / "data"
    prompts = [json.loads(x) for x in (data / f"BFCL_v4_{category}.json").read_text().splitlines() if x.strip()]
    answers = {a["id"]: a["ground_truth"] for a in
               (json.loads(x) for x in (data / "possible_answer" / f"BFCL_v4_{category}.json").read_text()
                .splitlines() if x.strip())}
    return {p["id"]: (p, answers[p["id"]]) for p in prompts}


def task_ids(category: str) -> list[str]:
    return list(_tasks(category))


def load_task(task_id: str) -> Task:
    """A task of the installed bfcl-eval data, by its id (``multi_turn_base_12``)."""
    category = _category(task_id)
    if category not in CATEGORIES:
        raise InvalidReference(f"task_id {task_id[:80]!r} is not in a multi-turn category ({', '.join(CATEGORIES)})")
    found = _tasks(category).get(task_id)
    if found is None:
        raise InvalidReference(f"no task {task_id[:80]!r} in the installed bfcl-eval data")
    prompt, ground_truth = found
    return task_from_dict({**copy.deepcopy(prompt), "ground_truth": copy.deepcopy(ground_truth)})


def _list_of(value: Any, kind: type, where: str) -> list[Any]:
    if not isinstance(value, list) or not all(isinstance(v, kind) for v in value):
        raise InvalidReference(f"{where} must be a list of {kind.__name__}")
    return value


def task_from_dict(ref: dict[str, Any]) -> Task:
    """A task given inline (the fields of BFCL's prompt entry plus its ``ground_truth``), or ``{"task_id": ...}``."""
    if "task_id" in ref:
        if not isinstance(ref["task_id"], str):
            raise InvalidReference("task_id must be a string")
        return load_task(ref["task_id"])
    for key in ("involved_classes", "ground_truth"):
        if key not in ref:
            raise InvalidReference(f'reference needs "task_id" or the task itself; "{key}" is missing')
    classes = _list_of(ref["involved_classes"], str, "involved_classes")
    if not classes:
        raise InvalidReference("involved_classes is empty")
    for name in classes:
        api_class(name)
    ground_truth = _list_of(ref["ground_truth"], list, "ground_truth")
    for i, turn in enumerate(ground_truth):
        _list_of(turn, str, f"ground_truth[{i}]")
    config = ref.get("initial_config") or {}
    if not isinstance(config, dict):
        raise InvalidReference("initial_config must be an object")
    question = ref.get("question") or [[] for _ in ground_truth]
    _list_of(question, list, "question")
    if len(question) != len(ground_truth):
        raise InvalidReference(f"question has {len(question)} turns and ground_truth {len(ground_truth)}")
    missed = ref.get("missed_function") or {}
    if not isinstance(missed, dict) or not all(
            isinstance(k, str) and k.isdigit() and isinstance(v, list) for k, v in missed.items()):
        raise InvalidReference('missed_function must map a turn index ("3") to a list of function names')
    missed = {k: [d["name"] if isinstance(d, dict) else str(d) for d in v] for k, v in missed.items()}
    task_id = str(ref.get("id", "inline"))
    long_context = ref.get("long_context")
    if long_context is None:
        long_context = "long_context" in _category(task_id) or "composite" in _category(task_id)
    return Task(task_id, config, classes, question, ground_truth, missed, bool(long_context))
