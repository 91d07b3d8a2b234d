"""Multi-turn episodes made from BFCL's ground truth and plausible mistakes, rendered two ways (as a trajectory of
chat messages and as what BFCL's decoders hand its checker), and bfcl-eval's own ``multi_turn_checker`` as the
oracle. Shared by the agreement tests and benchmarks/bfcl_episodes.py."""
from __future__ import annotations

import inspect
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.tool_calls import _wrong
from verifiers.kinds.bfcl.executor import parse_ground_truth, public_methods
from verifiers.kinds.bfcl.source import CATEGORIES, STEP_LIMIT, Task, api_class, load_task, task_ids

Call = tuple[str, dict[str, Any]]
# A step: calls made in one assistant message; "prose" is a message without calls, "garbled" one whose calls cannot
# be read (bad JSON in a structured call, broken call text).
Step = list[Call] | str
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
HARMLESS: dict[str, Call] = {
    "GorillaFileSystem": ("pwd", {}), "MathAPI": ("mean", {"numbers": [1.0, 2.0]}),
    "MessageAPI": ("list_users", {}), "TwitterAPI": ("posting_get_login_status", {}),
    "TicketAPI": ("ticket_get_login_status", {}), "TradingBot": ("get_current_time", {}),
    "TravelAPI": ("travel_get_login_status", {}), "VehicleControlAPI": ("check_tire_pressure", {}),
}


@dataclass
class EpisodeCase:
    task: Task
    mutation: str
    turns: list[list[Step]]  # per user turn, its steps
    text: bool = False  # the calls written as Python call text rather than structured tool_calls
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.task.id}:{self.mutation}{':text' if self.text else ''}"


def model_call(task: Task, text: str) -> Call:
    """A ground-truth call as a model writes it: every argument by name (BFCL's decoders drop positional ones)."""
    inv = parse_ground_truth(text)
    owner = None
    for cls_name in task.involved_classes:
        if inv.name in public_methods(api_class(cls_name)):
            owner = api_class(cls_name)
    kwargs = dict(inv.kwargs)
    if inv.args and owner is not None:
        params = [p for p in inspect.signature(getattr(owner, inv.name)).parameters if p != "self"]
        kwargs = {**dict(zip(params, inv.args)), **kwargs}
    return inv.name, kwargs


def mutations(task: Task, rng: random.Random) -> Iterator[tuple[str, list[list[Step]]]]:
    gt = [[model_call(task, c) for c in turn] for turn in task.ground_truth]
    sequential: list[list[Step]] = [[[c] for c in turn] + ["prose"] for turn in gt]
    yield "canonical_sequential", sequential
    yield "canonical_parallel", [([list(turn)] if turn else []) + ["prose"] for turn in gt]
    busy = [i for i, t in enumerate(gt) if t]
    if not busy:
        return
    t = rng.choice(busy)

    def with_turn(turn: list[Call], index: int = t) -> list[list[Step]]:
        out = [list(s) for s in sequential]
        out[index] = [[c] for c in turn] + ["prose"]
        return out

    k = rng.randrange(len(gt[t]))
    yield "dropped_call", with_turn(gt[t][:k] + gt[t][k + 1:])
    name, args = gt[t][k]
    if args:
        p = rng.choice(sorted(args))
        yield "changed_argument", with_turn([*gt[t][:k], (name, {**args, p: _wrong(args[p])}), *gt[t][k + 1:]])
        yield "dropped_argument", with_turn([*gt[t][:k], (name, {a: v for a, v in args.items() if a != p}),
                                             *gt[t][k + 1:]])
    multi = [i for i in busy if len(gt[i]) > 1]
    if multi:
        m = rng.choice(multi)
        yield "reversed", with_turn(list(reversed(gt[m])), m)
        j = rng.randrange(len(gt[m]) - 1)
        swapped = list(gt[m])
        swapped[j], swapped[j + 1] = swapped[j + 1], swapped[j]
        yield "swapped_adjacent", with_turn(swapped, m)
        yield "parallel_reversed", [list(s) for s in sequential[:m]] + [[list(reversed(gt[m])), "prose"]] + \
            [list(s) for s in sequential[m + 1:]]
    harmless = HARMLESS[rng.choice(task.involved_classes)]
    yield "extra_harmless_call", with_turn([*gt[t], harmless])
    yield "unknown_function", with_turn([*gt[t], ("no_such_function", {"x": 1})])
    yield "duplicated_call", with_turn([*gt[t], gt[t][k]])
    later = [i for i in busy if i + 1 < len(gt)]
    if later:
        e = rng.choice(later)
        early = [list(s) for s in sequential]  # the next turn's calls made a turn early
        early[e] = [[c] for c in gt[e] + gt[e + 1]] + ["prose"]
        early[e + 1] = ["prose"]
        yield "next_turn_early", early
        late = [list(s) for s in sequential]  # a turn's calls made a turn late
        late[e] = ["prose"]
        late[e + 1] = [[c] for c in gt[e] + gt[e + 1]] + ["prose"]
        yield "turn_late", late
    empty = [list(s) for s in sequential]
    empty[t] = ["prose"]
    yield "empty_turn", empty
    garbled = [list(s) for s in sequential]
    garbled[t] = ["garbled", *garbled[t]]
    yield "garbled_step_skipped", garbled
    garbled_only = [list(s) for s in sequential]
    garbled_only[t] = ["garbled"]
    yield "garbled_turn", garbled_only
    if len(gt) > 1:
        yield "missing_last_turn", [list(s) for s in sequential[:-1]]
    quiet = [i for i, turn in enumerate(gt) if not turn]
    if quiet and quiet[0] + 1 < len(gt):  # miss_func / miss_param: acting on the turn that should not act
        q = quiet[0]
        eager = [list(s) for s in sequential]
        eager[q] = [[c] for c in gt[q + 1]] + ["prose"]
        yield "acts_on_quiet_turn", eager
    flood = [list(s) for s in sequential]
    flood[t] = [[c] for c in gt[t]] + [[harmless]] * (STEP_LIMIT + 2) + ["prose"]
    yield "step_limit", flood
    if args:
        yield "arguments_left_out", with_turn([*gt[t][:k], (name, {}), *gt[t][k + 1:]])


def cases(categories: tuple[str, ...] = CATEGORIES, per_category: int | None = None, seed: int = 0,
          text_share: float = 0.3) -> list[EpisodeCase]:
    rng = random.Random(seed)
    out = []
    for category in categories:
        ids = task_ids(category)
        if per_category is not None:
            ids = rng.sample(ids, min(per_category, len(ids)))
        for task_id in ids:
            task = load_task(task_id)
            for mutation, turns in mutations(task, rng):
                out.append(EpisodeCase(task, mutation, turns, text=rng.random() < text_share))
    return out


# --- renderings --------------------------------------------------------------------------------------------------

def _python_text(calls: list[Call]) -> str:
    return "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in calls) + "]"


def user_message(case: EpisodeCase, turn: int) -> dict[str, Any]:
    question = case.task.question[turn]
    if question:
        return dict(question[-1])
    return {"role": "user", "content": ADDED_FUNCTIONS_PROMPT}


def assistant_message(step: Step, text: bool, n: int) -> dict[str, Any]:
    if step == "prose":
        return {"role": "assistant", "content": "Done."}
    if step == "garbled":
        if text:
            return {"role": "assistant", "content": "[cd(folder='a'"}
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "cd", "arguments": '{"folder": '}}]}
    assert isinstance(step, list)
    if text:
        return {"role": "assistant", "content": _python_text(step)}
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{n}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(step)]}


def messages(case: EpisodeCase) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    n = 0
    for turn, steps in enumerate(case.turns):
        out.append(user_message(case, turn))
        for step in steps:
            n += 1
            out.append(assistant_message(step, case.text, n))
            if isinstance(step, list) and case.text:  # prompt mode: the results come back as the user's turn
                out.append({"role": "user", "content": "(results)"})
            elif isinstance(step, list):
                out.extend({"role": "tool", "tool_call_id": f"c{n}_{i}", "content": "(result)"}
                           for i in range(len(step)))
    return out


def bfcl_decoded(case: EpisodeCase) -> list[list[list[str]]]:
    """The episode as BFCL's inference would have recorded and its runner decoded it: undecodable and call-less
    steps left out, a turn cut after the step limit and the turns after it gone."""
    out: list[list[list[str]]] = []
    for steps in case.turns:
        decoded: list[list[str]] = []
        for step in steps:
            if not isinstance(step, list) or not step:
                continue
            decoded.append([f"{n}({','.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in step])
            if len(decoded) > STEP_LIMIT:
                break
        out.append(decoded)
        if len(decoded) > STEP_LIMIT:
            break
    return out


# --- bfcl-eval's checker -----------------------------------------------------------------------------------------

@dataclass
class OracleVerdict:
    valid: bool
    error_type: str | None
    prefix_valid: list[bool]  # whether BFCL passes the episode cut after each turn


class Oracle:
    """bfcl-eval's ``multi_turn_checker`` (its module imports nothing heavy), with the runner's force-termination
    rule before it; instances it leaves in its module's globals are removed after each call."""

    def __init__(self) -> None:
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker, multi_turn_utils
        self._checker = multi_turn_checker.multi_turn_checker
        self._globals = vars(multi_turn_utils)
        self._n = 0

    def _check(self, decoded: list[list[list[str]]], case: EpisodeCase, turns: int) -> dict[str, Any]:
        gt = case.task.ground_truth[:turns]
        if len(decoded) != len(gt):
            return {"valid": False, "error_type": "multi_turn:force_terminated"}
        self._n += 1
        model_name = f"oracle{self._n}"
        entry = {"id": case.task.id, "initial_config": case.task.initial_config,
                 "involved_classes": case.task.involved_classes}
        try:
            return dict(self._checker(decoded, gt, entry, case.task.id.rsplit("_", 1)[0], model_name))
        finally:
            for key in [k for k in self._globals if k.startswith(model_name)]:
                del self._globals[key]

    def verdict(self, case: EpisodeCase, per_turn: bool = True) -> OracleVerdict:
        decoded = bfcl_decoded(case)
        whole = self._check(decoded, case, len(case.task.ground_truth))
        prefixes = []
        if per_turn:
            prefixes = [bool(self._check(decoded[:k], case, k)["valid"]) if k <= len(decoded) else False
                        for k in range(1, len(case.task.ground_truth) + 1)]
        return OracleVerdict(bool(whole["valid"]), whole.get("error_type"), prefixes)


# --- live sessions -----------------------------------------------------------------------------------------------

def as_inference(case: EpisodeCase) -> EpisodeCase:
    """The episode as BFCL's inference loop (and a live session) plays it: a turn ends at its first step without
    readable calls, or after the step limit."""
    turns: list[list[Step]] = []
    for steps in case.turns:
        kept: list[Step] = []
        ran = 0
        for step in steps:
            kept.append(step)
            if not isinstance(step, list) or not step:
                break
            ran += 1
            if ran > STEP_LIMIT:
                break
        turns.append(kept)
    return EpisodeCase(case.task, case.mutation, turns, case.text, case.extra)


def action(step: Step, text: bool, n: int) -> dict[str, Any]:
    """A step as a live session's action (the assistant message's ``tool_calls`` or ``content``)."""
    message = assistant_message(step, text, n)
    out: dict[str, Any] = {"content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out
