"""The client and the trainer adapters hand the server whatever the model wrote, however empty or broken, and the
tool specs of a text completion: TRL's string completions with a tools column and verl's plain responses with
``extra_info["tools"]`` are read with their specs; garbage calls in a conversation reach the server and are scored."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from reward_client import RewardClient, VerifyItem
from reward_client.messages import openai_messages
from reward_client.trl import make_reward_func

from tests.support.server import LiveServer
from tests.support.tool_calls import Entry, as_hermes, canonical, load_entries


def entry17(shared_data: Path) -> Entry:
    """BFCL simple_python_17: its spec requires `formatted`, its possible answer lets it be left out."""
    return next(e for e in load_entries(shared_data / "tools", "simple_python") if e.id == "simple_python_17")


def without_formatted(e: Entry) -> str:
    (name, args), = canonical(e, random.Random(0))
    return as_hermes([(name, {k: v for k, v in args.items() if k != "formatted"})])


def test_trl_string_completions_carry_their_tool_specs(server: LiveServer, shared_data: Path) -> None:
    e = entry17(shared_data)
    tools = json.dumps([{"type": "function", "function": f} for f in e.functions])  # as a dataset column holds it
    batch = {"prompts": ["Factorise 450."] * 2, "completions": [without_formatted(e)] * 2,
             "reference": [e.ground_truth] * 2, "tools": [tools, None], "completion_ids": [[1], [1]]}
    with_specs = make_reward_func("tool_calls", reference="reference", url=server.url, tools_column="tools")
    assert with_specs(**batch) == [0.0, 1.0]  # the row without specs cannot know `formatted` is required


def test_verl_plain_responses_carry_their_tool_specs(verl_module: Any, shared_data: Path) -> None:
    e = entry17(shared_data)
    info = {"verifier": "tool_calls", "tools": [{"type": "function", "function": f} for f in e.functions]}
    out = verl_module.compute_score("bfcl", without_formatted(e), e.ground_truth, info)
    assert (out["status"], out["score"]) == ("ok", 0.0), out
    out = verl_module.compute_score("bfcl", without_formatted(e), e.ground_truth, {"verifier": "tool_calls"})
    assert (out["status"], out["score"]) == ("ok", 1.0), out


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


GARBAGE_TURNS: dict[str, dict[str, Any]] = {
    "call not an object": {"role": "assistant", "content": None, "tool_calls": ["calculate_triangle_area()"]},
    "function not an object": {"role": "assistant", "tool_calls": [{"id": "c", "function": "calculate"}]},
    "no name, arguments as a dict": {"role": "assistant", "tool_calls": [{"function": {"arguments": {"base": 1}}}]},
    "empty with reasoning": {"role": "assistant", "content": None, "tool_calls": [], "reasoning": "Hmm."},
    "content missing": {"role": "assistant"},
    "arguments too deep for JSON": {"role": "assistant", "tool_calls": [
        {"function": {"name": "calculate_triangle_area", "arguments": nested(5000)}}]},
}


def test_garbage_turns_pass_the_client_and_are_scored(server: LiveServer, shared_data: Path) -> None:
    e = next(x for x in load_entries(shared_data / "tools", "simple_python") if x.id == "simple_python_0")
    tools = [{"type": "function", "function": f} for f in e.functions]
    items = [VerifyItem("tool_calls", reference=e.ground_truth, id=name, tools=tools,
                        messages=openai_messages([{"role": "user", "content": "Area of a 10 by 5 triangle?"}, turn]))
             for name, turn in GARBAGE_TURNS.items()]
    with RewardClient(server.url) as client:
        results = {r.id: r for r in client.verify(items)}
    assert set(results) == set(GARBAGE_TURNS)
    for name, r in results.items():
        assert (r.status, r.score) == ("no_answer", 0.0), (name, r)
    assert "no function name" in results["call not an object"].reason
    assert results["empty with reasoning"].reason == "no tool call found"
