"""The ``tool_calls`` verifier: the calls of the final assistant turn against BFCL-style expected calls.

Reference shapes:

- a list of BFCL possible answers ``[{"fn": {"arg": [acceptable values...]}}]`` (``""`` among the values: the
  argument may be left out; ``[]``: no call is the right answer), or of exact calls ``[{"name", "arguments"}]``;
- an object ``{"calls": [...], "tools": [...]}`` (``ground_truth`` is read as ``calls``, BFCL's ``function`` as
  ``tools``) when the tool specs travel with the reference rather than with the item;
- either object may name BFCL's ``language`` (``java``, ``javascript``; or carry BFCL's ``id``/``category``): the
  arguments are then source text read by their declared types, as BFCL's Java and JavaScript categories check them;
- an object ``{"turns": [[...], [...]], "tools": [...]}``: the expected calls of each assistant turn in order (``[]``
  for a turn that should not call, such as the final answer); each turn is scored and ``turn_scores`` set.
"""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from verifiers import conversation
from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.tool_calls.checker import FunctionSpec, Matching, RefCall, function_specs, match_calls
from verifiers.kinds.tool_calls.languages import LANGUAGES, as_source_text, detect, language_of_id
from verifiers.kinds.tool_calls.parse import MAX_CALLS, Call, Parsed, assistant_turns, parse_text, parse_turn
from verifiers.types import InvalidReference, Verdict


class ToolCallsOptions(BaseOptions):
    partial: bool = Field(False, description="Score the F1 of a maximum bipartite matching of fully correct calls "
                                             "instead of BFCL's all-or-nothing verdict.")
    max_chars: int = Field(200_000, ge=1, le=2_000_000,
                           description="Longest assistant text read for calls; a longer one reads as malformed.")
    language: Literal["auto", "python", "java", "javascript"] = Field(
        "auto", description="BFCL's argument rules: python, or java / javascript (every argument is source text, "
                            "read by its declared type). auto: the reference's language, its BFCL id or category, "
                            "else the Java or JavaScript type names of the tool specs, else python.")


def _ref_call(entry: Any, where: str) -> RefCall:
    if not isinstance(entry, dict):
        raise InvalidReference(f"{where}: a reference call must be an object")
    if isinstance(entry.get("name"), str) and ("arguments" in entry or "parameters" in entry):
        args = entry.get("arguments", entry.get("parameters")) or {}
        if not isinstance(args, dict):
            raise InvalidReference(f"{where}: arguments must be an object")
        return RefCall(entry["name"], {k: [v] for k, v in args.items()})
    if len(entry) == 1:
        (name, answers), = entry.items()
        if isinstance(answers, dict):
            return RefCall(name, {k: v if isinstance(v, list) else [v] for k, v in answers.items()})
    raise InvalidReference(f'{where}: expected {{"fn": {{"arg": [values]}}}} or {{"name": ..., "arguments": {{...}}}}')


def _ref_calls(value: Any, where: str) -> list[RefCall]:
    if not isinstance(value, list):
        raise InvalidReference(f"{where}: expected a list of calls")
    if len(value) > MAX_CALLS:
        raise InvalidReference(f"{where}: more than {MAX_CALLS} calls")
    return [_ref_call(e, f"{where}[{i}]") for i, e in enumerate(value)]


MAX_REFERENCE_VALUES = 4096  # acceptable values over all reference calls (BFCL's largest entries hold a few dozen)
MAX_REFERENCE_CHARS = 65_536  # their total size as JSON


def _bounded(turns: list[list[RefCall]]) -> list[list[RefCall]]:
    """Refuse a reference whose matching could cost more than a short check (every output call is compared with
    every acceptable value), so the check stays cheap enough to run on the server's event loop."""
    lists = [answers for turn in turns for ref in turn for answers in ref.answers.values()]
    count = sum(map(len, lists))
    if count > MAX_REFERENCE_VALUES:
        raise InvalidReference(f"reference lists {count} acceptable values, over {MAX_REFERENCE_VALUES}")
    size = 0
    for answers in lists:
        for v in answers:
            size += len(v) if isinstance(v, str) else len(json.dumps(v)) if isinstance(v, list | dict) else 8
    if size > MAX_REFERENCE_CHARS:
        raise InvalidReference(f"reference values total {size} characters, over {MAX_REFERENCE_CHARS}")
    return turns


def parse_reference(reference: Any) -> tuple[list[list[RefCall]], bool, Any]:
    """(expected calls per turn, whether the reference is per turn, tool specs it carries)."""
    turns, per_turn, tools = _parse_reference(reference)
    return _bounded(turns), per_turn, tools


def _parse_reference(reference: Any) -> tuple[list[list[RefCall]], bool, Any]:
    if isinstance(reference, list):
        return [_ref_calls(reference, "reference")], False, None
    if not isinstance(reference, dict):
        raise InvalidReference("reference must be a list of calls or an object with calls or turns")
    tools = reference.get("tools", reference.get("function"))
    if "turns" in reference:
        turns = reference["turns"]
        if not isinstance(turns, list) or not turns:
            raise InvalidReference("turns must be a non-empty list with the expected calls of each assistant turn")
        return [_ref_calls(t, f"turns[{i}]") for i, t in enumerate(turns)], True, tools
    calls = reference.get("calls", reference.get("ground_truth"))
    if calls is None:
        raise InvalidReference('reference object needs "calls" (or "ground_truth") or "turns"')
    return [_ref_calls(calls, "calls")], False, tools


def _score_turn(parsed: Parsed, refs: list[RefCall], specs: dict[str, FunctionSpec], partial: bool,
                language: str = "python") -> tuple[float, dict[str, Any]]:
    calls = parsed.calls if parsed.ok else []
    if language != "python" and parsed.format == "python":  # call text: BFCL's parsers keep each value as source
        calls = [Call(c.name, {k: as_source_text(v) for k, v in c.arguments.items()}) for c in calls]
    details: dict[str, Any] = {"format": parsed.format, "calls": [c.name[:100] for c in calls[:MAX_CALLS]]}
    if not parsed.ok:
        details["parse_error"] = parsed.error
    if not refs:  # no call is right: BFCL counts an output it cannot read as no call
        accepted = not calls
        details.update(accepted=accepted, reason="no call, as expected" if accepted else
                       f"{len(calls)} calls where none is expected",
                       components={"format": 1.0, "names": float(accepted), "argument_keys": float(accepted),
                                   "values": float(accepted)})
        return float(accepted), details
    m: Matching = match_calls(calls, refs, specs, structured=parsed.format == "tool_calls", language=language)
    f1 = 2 * m.matched / (len(calls) + len(refs))
    details.update(accepted=m.accepted, reason=parsed.error or m.reason, matching=m.pairs, matched=m.matched,
                   f1=round(f1, 6), components={"format": float(parsed.ok), **{k: round(v, 6) for k, v in
                                                                               m.components.items()}})
    return (f1 if partial else float(m.accepted)), details


def _descriptions(tools: Any) -> list[str]:
    out = []
    for tool in tools if isinstance(tools, list) else []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("description"), str):
            out.append(fn["description"])
    return out


def _language(option: str, reference: Any, specs: dict[str, FunctionSpec], tools: Any) -> str:
    """Which of BFCL's argument rules apply: the option, else what the reference says (``language``, or BFCL's
    ``id`` / ``category`` such as ``simple_java_3``), else the specs' Java or JavaScript type names."""
    if option != "auto":
        return option
    if isinstance(reference, dict):
        named = reference.get("language")
        if named in LANGUAGES:
            return str(named)
        for key in ("id", "category"):
            found = language_of_id(reference.get(key))
            if found:
                return found
    return detect([p for spec in specs.values() for p in spec.properties.values()], _descriptions(tools)) or "python"


class ToolCallsVerifier(Verifier[ToolCallsOptions]):
    name = "tool_calls"
    version = "1"
    description = (
        "Function calls checked by BFCL's AST rules: structured tool_calls or raw text (Hermes <tool_call> blocks, "
        "JSON, Python call syntax) against BFCL possible answers or exact calls; parallel calls in any order; "
        "partial: F1 of matched calls; per-turn references give turn_scores."
    )
    Options = ToolCallsOptions
    binary = False  # 0/1 unless partial credit is asked for
    inline_max_chars = 4000  # parsing is bounded (depth, calls) and the reference's size is capped (_bounded)

    def check(self, response: str, reference: Any, options: ToolCallsOptions) -> Verdict:
        expected, per_turn, ref_tools = parse_reference(reference)
        running = conversation.current()  # the item's trajectory, when it came as messages
        given_tools = conversation.current_tools()  # with messages or with a plain response
        specs = function_specs(given_tools if given_tools is not None else ref_tools)
        if running is not None:
            said = assistant_turns(running.messages)
            turns = [parse_turn(m, options.max_chars) for m in (said if per_turn else said[-1:])]
        else:
            turns = [parse_text(response, options.max_chars)]
        if not turns:
            return Verdict.no_answer("the conversation has no assistant turn")
        language = _language(options.language, reference, specs, given_tools if given_tools is not None else ref_tools)
        if not per_turn:
            score, details = _score_turn(turns[-1], expected[0], specs, options.partial, language)
            if language != "python":
                details["language"] = language
            return self._verdict(score, details, expected[0])
        scored = [_score_turn(t, expected[i] if i < len(expected) else [], specs, options.partial, language)
                  for i, t in enumerate(turns)]
        missing = max(0, len(expected) - len(turns))
        scores = [s for s, _ in scored] + [0.0] * missing
        total = sum(scores) / len(scores) if options.partial else float(all(s == 1.0 for s in scores))
        reason = (f"{sum(s == 1.0 for s in scores)} of {len(scores)} turns right"
                  + (f"; {missing} expected turns missing" if missing else ""))
        verdict = Verdict.ok(total, reason, turns=[d for _, d in scored], missing_turns=missing)
        verdict.turn_scores = [s for s, _ in scored]
        return verdict

    @staticmethod
    def _verdict(score: float, details: dict[str, Any], refs: list[RefCall]) -> Verdict:
        reason = str(details.pop("reason"))
        if refs and not details["calls"]:
            cause = f"could not read the tool calls: {details['parse_error']}" if "parse_error" in details else \
                "no tool call found"
            return Verdict.no_answer(cause, **details)
        return Verdict.ok(score, reason, **details)


VERIFIERS: list[Verifier[Any]] = [ToolCallsVerifier()]
