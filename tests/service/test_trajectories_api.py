"""Trajectories through POST /v1/verify on the real server: text verifiers score the final assistant turn, the
conversation and its tools reach a verifier in a worker process, per-turn scores come back, and every malformed or
over-long conversation is a 422 naming the item and field."""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import LiveServer, run_server

CALC = {"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic expression.",
                                         "parameters": {"type": "object", "properties": {"expr": {"type": "string"}},
                                                        "required": ["expr"]}}}


def call(cid: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def agent_conversation(question: str, final: Any, *, earlier: str = "Let me compute it.") -> list[dict[str, Any]]:
    """A tool-using math trajectory: the model calls a calculator, reads the result, then answers."""
    return [
        {"role": "system", "content": "You are a careful math assistant. Use the calculator tool when useful."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": earlier, "tool_calls": [call("call_0", "calculator", expr="16-3-4")]},
        {"role": "tool", "tool_call_id": "call_0", "content": "9"},
        {"role": "assistant", "content": final},
    ]


def rows(path: Path, n: int) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def gsm8k_answer(row: dict[str, Any]) -> str:
    return row["answer"].split("####")[-1].strip().replace(",", "")


def post(server: LiveServer, items: list[dict[str, Any]]) -> httpx.Response:
    with server.client() as client:
        return client.post("/v1/verify", json={"items": items})


def scores(server: LiveServer, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = post(server, items)
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


# ---------------------------------------------------------------- text verifiers score the final assistant turn

def test_math_scores_the_final_turn_of_gsm8k_and_math500_trajectories(server: LiveServer, shared_data: Path) -> None:
    gsm = rows(shared_data / "math" / "gsm8k.test.jsonl", 4)
    m500 = rows(shared_data / "math" / "math500.test.jsonl", 4)
    problems = [(r["question"], gsm8k_answer(r)) for r in gsm] + [(r["problem"], r["answer"]) for r in m500]
    wrong = "\\frac{17}{3}"  # no gold of these eight problems
    items = []
    for question, gold in problems:
        # right in the final turn, after a tool call and its result
        items.append({"verifier": "math", "reference": gold,
                      "messages": agent_conversation(question, f"So the answer is $\\boxed{{{gold}}}$.")})
        # the gold only in an earlier turn, the final turn commits to another value: the final turn is the answer
        items.append({"verifier": "math", "reference": gold,
                      "messages": agent_conversation(question, f"On reflection the answer is $\\boxed{{{wrong}}}$.",
                                                     earlier=f"I think it is \\boxed{{{gold}}}. Let me check.")})
        # an earlier wrong answer the model corrected is not a hedge
        items.append({"verifier": "math", "reference": gold, "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": f"The answer is $\\boxed{{{wrong}}}$."},
            {"role": "user", "content": "Please check your work."},
            {"role": "assistant", "content": [{"type": "text", "text": "I made an error earlier. "},
                                              {"type": "text", "text": f"The answer is $\\boxed{{{gold}}}$."}]},
        ]})
    results = scores(server, items)
    got = [(r["status"], r["score"]) for r in results]
    assert got[0::3] == [("ok", 1.0)] * len(problems), results[0::3]
    assert [s for _, s in got[1::3]] == [0.0] * len(problems), results[1::3]
    assert got[2::3] == [("ok", 1.0)] * len(problems), results[2::3]


def test_a_final_turn_of_only_tool_calls_gives_text_verifiers_an_empty_response(server: LiveServer) -> None:
    messages = [{"role": "user", "content": "What is 6*7?"},
                {"role": "assistant", "content": "The answer is 42."},
                {"role": "user", "content": "Double-check with the tool."},
                {"role": "assistant", "content": None, "tool_calls": [call("c1", "calculator", expr="6*7")]}]
    math, exact = scores(server, [{"verifier": "math", "reference": "42", "messages": messages},
                                  {"verifier": "exact_match", "reference": "42", "messages": messages}])
    assert math["score"] == 0.0 and math["status"] == "no_answer", math  # 42 is only in an earlier turn
    assert exact["score"] == 0.0, exact


def test_plain_responses_and_trajectories_mix_in_one_batch(server: LiveServer) -> None:
    results = scores(server, [
        {"verifier": "exact_match", "response": "Paris", "reference": "paris"},
        {"verifier": "exact_match", "reference": "paris", "messages": [
            {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris"}]},
    ])
    assert [r["score"] for r in results] == [1.0, 1.0]
    assert [r["turn_scores"] for r in results] == [None, None]


# ---------------------------------------------------------------- the trajectory reaches a worker; turn scores return

def test_messages_and_tools_reach_a_worker_and_turn_scores_come_back(server: LiveServer) -> None:
    messages = agent_conversation("What is 16-3-4, doubled?", [{"type": "text", "text": "It is "},
                                                                {"type": "text", "text": "18."}])
    plain, traj = scores(server, [
        {"verifier": "test_turns", "response": "18"},
        {"verifier": "test_turns", "messages": messages, "tools": [CALC]},
    ])
    assert plain["reason"] == "no trajectory bound"
    assert plain["turn_scores"] is None
    assert traj["turn_scores"] == [1.0, 0.0] and traj["score"] == 0.5
    details = traj["details"]
    assert details["roles"] == ["system", "user", "assistant", "tool", "assistant"]
    assert details["texts"] == ["Let me compute it.", "It is 18."]
    assert details["response"] == "It is 18."  # the item's response is the final turn's text parts, joined
    assert details["tools"] == ["calculator"]
    assert isinstance(details["pid"], int)


def test_nested_checks_of_a_spec_get_the_conversation(server: LiveServer) -> None:
    messages = agent_conversation("What is 16-3-4?", "It is \\boxed{9}.")
    options = {"components": [{"name": "turns", "verifier": "test_turns", "use_reference": False},
                              {"name": "math", "verifier": "math"}]}
    [result] = scores(server, [{"verifier": "spec", "reference": "9", "options": options, "messages": messages}])
    components = result["details"]["components"]
    assert components["turns"]["score"] == 0.5, components  # the nested check read the trajectory
    assert components["math"]["score"] == 1.0 and result["score"] == 1.5, result


# ---------------------------------------------------------------- 422s, each named

GOOD = agent_conversation("What is 16-3-4?", "It is 9.")


def with_message(j: int, change: dict[str, Any]) -> list[dict[str, Any]]:
    messages = [dict(m) for m in GOOD]
    messages[j] = {k: v for k, v in {**messages[j], **change}.items() if v is not ...}
    return messages


BAD_ITEMS = {
    "both response and messages": ({"response": "9", "messages": GOOD}, [], "exactly one of response"),
    "neither response nor messages": ({}, [], "exactly one of response"),
    "empty messages": ({"messages": []}, ["messages"], "at least 1"),
    "unknown role": ({"messages": with_message(1, {"role": "developer"})}, ["messages", 1], "role"),
    "role missing": ({"messages": with_message(1, {"role": ...})}, ["messages", 1], "role"),
    "unknown field in a message": ({"messages": with_message(1, {"contnet": "x"})}, ["messages", 1], "contnet"),
    "tool result for no call": ({"messages": with_message(3, {"tool_call_id": "call_9"})},
                                ["messages", 3, "tool_call_id"], "no earlier assistant tool call"),
    "tool result before its call": ({"messages": [GOOD[1], GOOD[3], GOOD[2], GOOD[4]]},
                                    ["messages", 1, "tool_call_id"], "no earlier assistant tool call"),
    "tool result without tool_call_id": ({"messages": with_message(3, {"tool_call_id": ...})},
                                         ["messages", 3, "tool", "tool_call_id"], "required"),
    "image part": ({"messages": with_message(1, {"content": [{"type": "image_url", "image_url": {"url": "x"}}]})},
                   ["messages", 1, "user", "content"], "text"),
    "text part without text": ({"messages": with_message(1, {"content": [{"type": "text"}]})},
                               ["messages", 1, "user", "content"], "text"),
    "null user content": ({"messages": with_message(1, {"content": None})}, ["messages", 1, "user", "content"], ""),
    "tool_calls on a user message": ({"messages": with_message(1, {"tool_calls": [call("c", "f")]})},
                                     ["messages", 1, "user", "tool_calls"], "not permitted"),
    "no assistant turn": ({"messages": GOOD[:2]}, ["messages"], "no assistant turn"),
    "a call answered but without id": ({"messages": with_message(2, {"tool_calls": [
        {"type": "function", "function": {"name": "calculator", "arguments": "{}"}}]})},
        ["messages", 3, "tool_call_id"], "no earlier assistant tool call"),
    "tools not a list of objects": ({"messages": GOOD, "tools": ["calculator"]}, ["tools", 0], "dictionary"),
}


@pytest.mark.parametrize("name", list(BAD_ITEMS))
def test_malformed_trajectory_is_a_422_naming_the_item_and_field(server: LiveServer, name: str) -> None:
    fields, where, words = BAD_ITEMS[name]
    good = {"verifier": "exact_match", "reference": "9", "messages": GOOD}
    bad = {"verifier": "exact_match", "reference": "9", **fields}
    r = post(server, [good, bad])  # the bad item is the second: the answer must say items[1]
    assert r.status_code == 422, r.text
    body = r.json()
    if "errors" in body:  # the schema's refusal: pydantic's locations
        locs = [e["loc"] for e in body["errors"]]
        assert any(loc[:3] == ["body", "items", 1] for loc in locs), body
        assert any(loc[3:3 + len(where)] == where for loc in locs), (where, body)
        assert all(loc[:3] == ["body", "items", 1] for loc in locs), body  # the good item is not blamed
        assert words in body["detail"], body["detail"]
    else:  # the route's refusal: one location
        assert body["loc"] == ["items", 1, *where], body
        assert body["detail"].startswith("items[1].") and words in body["detail"], body["detail"]


def test_a_lone_surrogate_in_a_message_is_named(server: LiveServer) -> None:
    body = ('{"items": [{"verifier": "exact_match", "messages": [{"role": "user", "content": "hi"}, '
            '{"role": "assistant", "content": [{"type": "text", "text": "x\\ud800"}]}]}]}')
    with server.client() as client:
        r = client.post("/v1/verify", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["loc"] == ["items", 0, "messages", 1, "content", 0, "text"]


# ---------------------------------------------------------------- limits: settings, enforced

@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"REWARD_SERVICE_MAX_MESSAGES": "6", "REWARD_SERVICE_MAX_MESSAGES_CHARS": "3000",
           "REWARD_SERVICE_MAX_TOOLS_CHARS": "400", "REWARD_SERVICE_WORKERS": "1"}
    with run_server(tmp_path_factory.mktemp("small"), env=env) as live:
        yield live


def turns(n: int, text: str = "ok") -> list[dict[str, Any]]:
    return [{"role": "user" if k % 2 == 0 else "assistant", "content": text} for k in range(n)]


def test_the_message_count_limit_is_enforced(small_server: LiveServer) -> None:
    assert post(small_server, [{"verifier": "exact_match", "reference": "ok", "messages": turns(6)}]).status_code \
        == 200
    for attempt in (turns(7), turns(1000)):
        r = post(small_server, [{"verifier": "exact_match", "reference": "ok", "messages": turns(2)},
                                {"verifier": "exact_match", "reference": "ok", "messages": attempt}])
        assert r.status_code == 422, r.text
        assert r.json()["loc"] == ["items", 1, "messages"]
        assert f"has {len(attempt)} messages, over the limit of 6" in r.json()["detail"]


def test_the_character_limit_counts_every_part_of_the_conversation(small_server: LiveServer) -> None:
    fits = turns(2, "x" * 1400)
    assert post(small_server, [{"verifier": "exact_match", "messages": fits, "reference": "x"}]).status_code == 200
    # over the limit through the content, through text parts, through tool-call arguments, through tool results
    big_parts = [{"role": "user", "content": "q"},
                 {"role": "assistant", "content": [{"type": "text", "text": "y" * 1000}] * 3}]
    big_args = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call("c", "f", blob="z" * 3000)]}]
    big_result = [{"role": "user", "content": "q"},
                  {"role": "assistant", "content": None, "tool_calls": [call("c", "f")]},
                  {"role": "tool", "tool_call_id": "c", "content": "w" * 3000}]
    for messages in (turns(2, "x" * 3000), big_parts, big_args, big_result):
        r = post(small_server, [{"verifier": "exact_match", "messages": messages, "reference": "x"}])
        assert r.status_code == 422, r.text
        assert r.json()["loc"] == ["items", 0, "messages"] and "over the limit of 3000" in r.json()["detail"]


def test_the_tools_limits_are_enforced(small_server: LiveServer, server: LiveServer) -> None:
    ok = post(small_server, [{"verifier": "exact_match", "messages": turns(2), "tools": [CALC]}])
    assert ok.status_code == 200, ok.text
    many = [CALC] * 5
    r = post(small_server, [{"verifier": "exact_match", "messages": turns(2), "tools": many}])
    assert r.status_code == 422 and r.json()["loc"] == ["items", 0, "tools"], r.text
    deep: Any = {}
    for _ in range(100):
        deep = {"d": deep}
    r = post(server, [{"verifier": "exact_match", "messages": turns(2), "tools": [deep]}])
    assert r.status_code == 422 and r.json()["loc"] == ["items", 0, "tools"], r.text
    assert "nested 102 levels deep" in r.json()["detail"]


# ---------------------------------------------------------------- code scores the final turn's program

@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_code_runs_the_program_of_the_final_turn(server: LiveServer, shared_data: Path) -> None:
    with open(shared_data / "code" / "mbpp.jsonl") as f:
        task = json.loads(f.readline())
    reference = {"test_list": task["test_list"]}
    name = re.search(r"assert\s+(\w+)\(", task["test_list"][0]).group(1)  # type: ignore[union-attr]
    broken = f"```python\ndef {name}(*args):\n    return None\n```"
    fixed = f"Here is the corrected function:\n```python\n{task['code']}\n```"
    debugging = [
        {"role": "user", "content": task["text"]},
        {"role": "assistant", "content": broken},
        {"role": "user", "content": "Your function fails the tests. Run them and fix it."},
        {"role": "assistant", "content": None, "tool_calls": [call("run_1", "python", code=task["test_list"][0])]},
        {"role": "tool", "tool_call_id": "run_1", "content": "AssertionError"},
        {"role": "assistant", "content": fixed},
    ]
    regressed = [*debugging[:-1], {"role": "assistant", "content": broken}]
    good, bad = scores(server, [{"verifier": "code", "reference": reference, "messages": debugging},
                                {"verifier": "code", "reference": reference, "messages": regressed}])
    assert (good["status"], good["score"]) == ("ok", 1.0), good
    assert bad["status"] == "ok" and bad["score"] < 1.0, bad
