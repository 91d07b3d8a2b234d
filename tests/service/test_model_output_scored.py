"""A model's output is never a refused request: empty final turns as vLLM and the OpenAI SDK return them and garbage
in a model's calls are scored through POST /v1/verify beside good items of the same batch, while a request that is
malformed as a request (a role no chat API has, a tool result without its call, wrong JSON types) stays a 422
naming the item and field. Tool specs also come with a plain response, the generated text a trainer holds."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import LiveServer
from tests.support.tool_calls import Entry, as_hermes, as_python, canonical, load_entries


def post(server: LiveServer, items: list[dict[str, Any]]) -> httpx.Response:
    with server.client() as client:
        return client.post("/v1/verify", json={"items": items})


def results(server: LiveServer, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = post(server, items)
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


def openai_tools(entry: Entry) -> list[dict[str, Any]]:
    return [{"type": "function", "function": f} for f in entry.functions]


def entry(shared_data: Path, category: str, entry_id: str | None = None) -> Entry:
    entries = load_entries(shared_data / "tools", category)
    return next(e for e in entries if entry_id is None or e.id == entry_id)


def question(e: Entry) -> dict[str, Any]:
    return {"role": "user", "content": f"(BFCL {e.id}) Answer with the tools if one applies."}


# The final assistant message of a chat completion that wrote nothing, as each server or SDK writes it.
EMPTY_TURNS: dict[str, dict[str, Any]] = {
    # vLLM's /v1/chat/completions message when the tool parser found no call (tool_choice "auto")
    "vllm_no_call": {"role": "assistant", "reasoning_content": None, "content": None, "tool_calls": []},
    # the same from a reasoning model: everything went to the reasoning parser
    "vllm_reasoning_only": {"role": "assistant", "reasoning_content": "The user asks for the weather on Mars; none "
                            "of the functions covers it, so I should not call any.", "content": None,
                            "tool_calls": []},
    # newer vLLM names it `reasoning`
    "vllm_reasoning_field": {"role": "assistant", "reasoning": "No function applies.", "content": None,
                             "tool_calls": []},
    # openai-python's ChatCompletionMessage.model_dump(): every field, null where unset
    "openai_sdk_dump": {"content": None, "refusal": None, "role": "assistant", "annotations": None, "audio": None,
                        "function_call": None, "tool_calls": None},
    "annotations_list": {"role": "assistant", "content": None, "annotations": [], "tool_calls": None},
    "empty_string": {"role": "assistant", "content": ""},
    "content_missing": {"role": "assistant"},
    "empty_text_parts": {"role": "assistant", "content": [{"type": "text", "text": ""}]},
    # OpenAI's refusal content part
    "refusal_part": {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}],
                     "refusal": "I can't help with that."},
}


@pytest.mark.parametrize("shape", list(EMPTY_TURNS))
def test_an_empty_final_turn_is_scored_as_the_empty_output(server: LiveServer, shared_data: Path,
                                                           shape: str) -> None:
    irrelevant, simple = entry(shared_data, "irrelevance"), entry(shared_data, "simple_python")
    empty = EMPTY_TURNS[shape]
    right = canonical(simple, random.Random(0))
    items = [
        # "no function applies": no call is the right answer
        {"id": "irrelevance", "verifier": "tool_calls", "reference": irrelevant.ground_truth,
         "tools": openai_tools(irrelevant), "messages": [question(irrelevant), empty]},
        # a call is required
        {"id": "needs_call", "verifier": "tool_calls", "reference": simple.ground_truth,
         "tools": openai_tools(simple), "messages": [question(simple), empty]},
        # text verifiers: an answer is required
        {"id": "exact", "verifier": "exact_match", "reference": "42", "messages": [question(simple), empty]},
        {"id": "math", "verifier": "math", "reference": "42", "messages": [question(simple), empty]},
        # a right answer in the same batch is still scored
        {"id": "good", "verifier": "tool_calls", "reference": simple.ground_truth, "tools": openai_tools(simple),
         "response": as_hermes(right)},
    ]
    by_id = {r["id"]: r for r in results(server, items)}
    assert (by_id["irrelevance"]["status"], by_id["irrelevance"]["score"]) == ("ok", 1.0), by_id["irrelevance"]
    assert by_id["irrelevance"]["details"]["calls"] == []
    assert (by_id["needs_call"]["status"], by_id["needs_call"]["score"]) == ("no_answer", 0.0), by_id["needs_call"]
    assert by_id["needs_call"]["reason"] == "no tool call found"
    assert by_id["exact"]["score"] == 0.0 and by_id["exact"]["status"] in ("ok", "no_answer"), by_id["exact"]
    assert (by_id["math"]["status"], by_id["math"]["score"]) == ("no_answer", 0.0), by_id["math"]
    assert (by_id["good"]["status"], by_id["good"]["score"]) == ("ok", 1.0), by_id["good"]


def test_a_per_turn_reference_scores_an_empty_final_answer(server: LiveServer) -> None:
    """An agent that called a tool, read the result, then ended with an empty turn: the last turn expects no call,
    so its turn score is 1; the item is scored, not refused."""
    messages = [
        {"role": "user", "content": "What's the weather in Berlin in celsius?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "chatcmpl-tool-5b1f", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Berlin", "unit": "celsius"}'}}]},
        {"role": "tool", "tool_call_id": "chatcmpl-tool-5b1f", "content": '{"temp": 21}'},
        {"role": "assistant", "reasoning_content": "I have the answer.", "content": None, "tool_calls": []},
    ]
    reference = {"turns": [[{"get_weather": {"city": ["Berlin"], "unit": ["celsius", ""]}}], []]}
    [r] = results(server, [{"verifier": "tool_calls", "reference": reference, "messages": messages}])
    assert r["turn_scores"] == [1.0, 1.0] and r["score"] == 1.0, r


def _call(name: Any = ..., arguments: Any = ..., **extra: Any) -> dict[str, Any]:
    function = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not ...}
    return {"id": "call_0", "type": "function", "function": function, **extra}


def test_garbage_in_a_models_calls_is_scored_never_refused(server: LiveServer, shared_data: Path) -> None:
    simple = entry(shared_data, "simple_python", "simple_python_0")  # calculate_triangle_area(base=10, height=5)
    (name, args), = canonical(simple, random.Random(0))
    good = json.dumps(args)
    calls: dict[str, list[dict[str, Any]] | dict[str, Any]] = {
        "right": [_call(name, good)],
        "arguments_as_object": [_call(name, args)],  # TRL and verl hold them so
        "id_missing": [{"type": "function", "function": {"name": name, "arguments": good}}],
        "type_missing": [{"id": "call_0", "function": {"name": name, "arguments": good}}],
        "streamed_index": [_call(name, good, index=0)],
        "invalid_json": [_call(name, good[:-3])],
        "list_arguments": [_call(name, "[10, 5]")],
        "number_arguments": [_call(name, "10")],
        "null_json_arguments": [_call(name, "null")],
        "number_as_arguments": [_call(name, 10)],
        "no_name": [_call(arguments=good)],
        "null_name": [_call(None, good)],
        "no_function": [{"id": "call_0", "type": "function"}],
        "null_function": [{"id": "call_0", "type": "function", "function": None}],
        "huge_name": [_call("f" * 10_000, good)],
        "unknown_tool": [_call("rm_rf_everything", good)],
        "deep_arguments": [_call(name, "[" * 5000 + "]" * 5000)],
        "deep_object_arguments": [_call(name, {"a": json.loads("[" * 40 + "1" + "]" * 40)})],
    }
    items = [{"id": k, "verifier": "tool_calls", "reference": simple.ground_truth, "tools": openai_tools(simple),
              "messages": [question(simple), {"role": "assistant", "content": None, "tool_calls": v}]}
             for k, v in calls.items()]
    by_id = {r["id"]: r for r in results(server, items)}
    for ok in ("right", "arguments_as_object", "id_missing", "type_missing", "streamed_index"):
        assert (by_id[ok]["status"], by_id[ok]["score"]) == ("ok", 1.0), by_id[ok]
    for bad, words in (("invalid_json", "invalid JSON"), ("list_arguments", "arguments must be an object"),
                       ("number_arguments", "got int"), ("null_json_arguments", "got NoneType"),
                       ("number_as_arguments", "got int"), ("no_name", "no function name"),
                       ("null_name", "no function name"), ("no_function", "no function name"),
                       ("null_function", "no function name"), ("deep_arguments", "nested deeper"),
                       ("deep_object_arguments", "nested deeper")):
        r = by_id[bad]
        assert (r["status"], r["score"]) == ("no_answer", 0.0), (bad, r)
        assert words in r["reason"] and r["details"]["components"]["format"] == 0.0, (bad, r)
    huge, unknown = by_id["huge_name"], by_id["unknown_tool"]
    assert (huge["status"], huge["score"]) == ("ok", 0.0) and huge["details"]["calls"] == ["f" * 100], huge
    assert len(huge["reason"]) < 400, huge["reason"]
    assert (unknown["status"], unknown["score"]) == ("ok", 0.0) and "rm_rf_everything" in unknown["reason"]


# ---------------------------------------------------------------- malformed requests stay 422s naming the item

def _request_with(message_change: dict[str, Any] | None = None, extra: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
    turn = {"role": "assistant", "content": None, "tool_calls": [_call("f", "{}")]}
    messages = [{"role": "user", "content": "hi"}, {**turn, **(message_change or {})}, *(extra or [])]
    return {"verifier": "tool_calls", "reference": [], "messages": messages}


MALFORMED = {
    "unknown role": (_request_with({"role": "robot"}), ["messages", 1], "robot"),
    "tool result without its call": (_request_with(extra=[{"role": "tool", "tool_call_id": "call_9",
                                                            "content": "4"}]),
                                     ["messages", 2, "tool_call_id"], "no earlier assistant tool call"),
    "tool result answering a call without id": (
        _request_with({"tool_calls": [{"type": "function", "function": {"name": "f"}}]},
                      [{"role": "tool", "tool_call_id": "call_0", "content": "4"}]),
        ["messages", 2, "tool_call_id"], "no earlier assistant tool call"),
    "content a number": (_request_with({"content": 42}), ["messages", 1, "assistant", "content"], ""),
    "tool_calls a string": (_request_with({"tool_calls": "f()"}), ["messages", 1, "assistant", "tool_calls"], ""),
    "a call a string": (_request_with({"tool_calls": ["f()"]}), ["messages", 1, "assistant", "tool_calls", 0], ""),
    "call type not function": (_request_with({"tool_calls": [{**_call("f", "{}"), "type": "code"}]}),
                               ["messages", 1, "assistant", "tool_calls", 0, "type"], ""),
    "tools not objects": ({"verifier": "tool_calls", "reference": [], "response": "x", "tools": ["f"]},
                          ["tools", 0], ""),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_request_is_still_a_422_naming_the_item(server: LiveServer, name: str) -> None:
    bad, where, words = MALFORMED[name]
    good = {"verifier": "exact_match", "reference": "9", "response": "9"}
    r = post(server, [good, bad])
    assert r.status_code == 422, r.text
    body = r.json()
    if "errors" in body:
        locs = [e["loc"] for e in body["errors"]]
        assert all(loc[:3] == ["body", "items", 1] for loc in locs), body
        assert any(loc[3:3 + len(where)] == where for loc in locs), (where, body)
    else:
        assert body["loc"] == ["items", 1, *where], body
        assert body["detail"].startswith("items[1].") and words in body["detail"], body


# ---------------------------------------------------------------- tools with a plain response

def test_tools_with_a_plain_response_read_the_text_with_the_specs(server: LiveServer, shared_data: Path) -> None:
    """simple_python_17's spec requires `formatted`, its possible answer lets it be left out: only the specs the
    item carries make a call without it wrong, as BFCL's checker does."""
    e = entry(shared_data, "simple_python", "simple_python_17")
    full = canonical(e, random.Random(0))
    (name, args), = full
    without = [(name, {k: v for k, v in args.items() if k != "formatted"})]
    text = {"hermes": as_hermes(without), "python": as_python(without),
            "qwen_think": f"<think>\nI need the prime factors.\n</think>\n\n{as_hermes(without)}"}
    items = []
    for how, response in text.items():
        items.append({"id": f"{how}/tools", "verifier": "tool_calls", "response": response,
                      "reference": e.ground_truth, "tools": openai_tools(e)})
        items.append({"id": f"{how}/none", "verifier": "tool_calls", "response": response,
                      "reference": e.ground_truth})
    items.append({"id": "right", "verifier": "tool_calls", "response": as_python(full),
                  "reference": e.ground_truth, "tools": openai_tools(e)})
    by_id = {r["id"]: r for r in results(server, items)}
    for how in text:
        with_specs, without_specs = by_id[f"{how}/tools"], by_id[f"{how}/none"]
        assert with_specs["score"] == 0.0 and "missing required argument 'formatted'" in with_specs["reason"], \
            with_specs
        assert without_specs["score"] == 1.0, without_specs
    assert by_id["right"]["score"] == 1.0, by_id["right"]


def test_tools_with_a_plain_response_are_held_to_the_tools_limits(server: LiveServer) -> None:
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    r = post(server, [{"verifier": "tool_calls", "reference": [], "response": "no call", "tools": [{"d": deep}]}])
    assert r.status_code == 422 and r.json()["loc"] == ["items", 0, "tools"], r.text
    assert "nested 102 levels deep" in r.json()["detail"]
