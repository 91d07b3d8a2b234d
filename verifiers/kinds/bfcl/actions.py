"""A model's step (one assistant message) read into calls with the ``tool_calls`` parser, and a trajectory split
into BFCL turns.

BFCL decodes each step of a turn and skips one that does not decode (bad JSON, call text it cannot read, arguments
that are not an object) or decodes to no call: such a step runs nothing. A step is all or nothing, as in BFCL: one
unreadable call among parallel ones makes the whole step unreadable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifiers.kinds.bfcl.executor import Invocation
from verifiers.kinds.tool_calls.parse import content_text, parse_structured, parse_text


@dataclass
class Step:
    calls: list[Invocation] = field(default_factory=list)
    format: str = "none"
    error: str | None = None  # set when the step tried to call but could not be read

    @property
    def runs(self) -> bool:
        return self.error is None and bool(self.calls)


def _step(parsed: Any) -> Step:
    if not parsed.ok:
        return Step([], parsed.format, parsed.error)
    return Step([Invocation(c.name, dict(c.arguments)) for c in parsed.calls], parsed.format)


def _empty_arguments(tool_calls: Any) -> bool:
    """Whether a structured call's arguments are the empty string: BFCL's function-calling decoder reads them with
    ``json.loads``, which fails, so BFCL skips the step (the parser alone would read them as no arguments)."""
    for call in tool_calls if isinstance(tool_calls, list) else []:
        fn = call.get("function", call) if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str) and not fn["arguments"].strip():
            return True
    return False


def read_message(message: dict[str, Any], max_chars: int) -> Step:
    """An assistant message: its structured ``tool_calls`` when it has any, else the calls written in its text."""
    return read_action(message.get("tool_calls"), message.get("content"), max_chars)


def read_action(tool_calls: Any, text: Any, max_chars: int) -> Step:
    """A live step: structured ``tool_calls`` (OpenAI shape or ``{"name", "arguments"}``) or call text."""
    if tool_calls:
        if _empty_arguments(tool_calls):
            return Step([], "tool_calls", "a call's arguments are an empty string, which BFCL cannot decode")
        return _step(parse_structured(tool_calls))
    return _step(parse_text(content_text(text), max_chars))


@dataclass
class Turns:
    """The steps of each user turn (message position and what it read as), and the assistant messages before the
    first user message (ignored)."""

    steps: list[list[tuple[int, Step]]]
    before_first_user: int = 0
    result_messages: int = 0


def split_turns(messages: list[dict[str, Any]], max_chars: int) -> Turns:
    """Each user message opens the next turn, except one that directly follows an assistant message whose calls
    ran: that is the calls' results, as BFCL's prompt mode sends them back (its loop only moves to the next turn
    after a step without calls). Assistant messages are the steps of the turn they follow; system and tool messages
    are context (the replay computes its own results)."""
    out = Turns([])
    previous_ran = False
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "user":
            if previous_ran and out.steps:
                out.result_messages += 1
            else:
                out.steps.append([])
            previous_ran = False
        elif role == "assistant":
            step = read_message(m, max_chars)
            if out.steps:
                out.steps[-1].append((i, step))
            else:
                out.before_first_user += 1
            previous_ran = step.runs
        else:
            previous_ran = False
    return out
