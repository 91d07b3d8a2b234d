"""The ``tool_calls`` verifier at the library level: the formats it reads, BFCL's rules, partial credit, per-turn
scores, the engine's worker path with messages, and outputs written to break it."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from verifiers import conversation
from verifiers.engine import local_engine
from verifiers.kinds.tool_calls import ToolCallsVerifier
from verifiers.kinds.tool_calls.parse import parse_text
from verifiers.types import Status, Verdict, VerifyItem

V = ToolCallsVerifier()

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "temp": {"type": "float"},
        "units": {"type": "string", "enum": ["c", "f"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "dict"}},
        "required": ["city"]}}}
MATH = {"name": "math.factorial", "parameters": {"type": "dict", "properties": {"number": {"type": "integer"}},
                                                  "required": ["number"]}}
TOOLS = [WEATHER, MATH]


def ref(calls: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"calls": calls, "tools": TOOLS if tools is None else tools}


def check(response: str, reference: Any, **options: Any) -> Verdict:
    return V.check(response, reference, V.parse_options(options))


def check_messages(messages: list[dict[str, Any]], reference: Any, tools: Any = None, **options: Any) -> Verdict:
    with conversation.bound(messages, tools):  # as the engine binds an item's trajectory around its check
        return V.check(conversation.final_text(messages), reference, V.parse_options(options))


def hermes(*calls: tuple[str, dict[str, Any]]) -> str:
    return "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls)


def assistant_calls(*calls: tuple[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function",
         "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
        for i, (n, a) in enumerate(calls)]}


SEOUL = {"get_weather": {"city": ["Seoul", "Seoul, South Korea"], "days": [3, ""], "units": ["c", ""]}}


@pytest.mark.parametrize("text, fmt", [
    ('[get_weather(city="seoul", days=3)]', "python"),
    ('get_weather(city="Seoul", days=3)', "python"),
    ("```python\n[get_weather(city='Seoul', days=3)]\n```", "python"),
    (hermes(("get_weather", {"city": "Seoul", "days": 3})), "hermes"),
    ('<think>Which city? Seoul.</think><tool_call>{"name": "get_weather", "arguments": {"city": "Seoul", "days": 3}}'
     "</tool_call>", "hermes"),
    ('{"name": "get_weather", "arguments": {"city": "Seoul", "days": 3}}', "json"),
    ('[{"name": "get_weather", "parameters": {"city": "Seoul", "days": 3}}]', "json"),
    ('```json\n{"function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Seoul\\", \\"days\\": 3}"}}\n```',
     "json"),
    ('{"tool_calls": [{"get_weather": {"city": "Seoul", "days": 3}}]}', "json"),
])
def test_every_text_format_is_read(text: str, fmt: str) -> None:
    v = check(text, ref([SEOUL]))
    assert (v.status, v.score, v.details["format"]) == (Status.OK, 1.0, fmt), v.reason


def test_structured_tool_calls_of_the_final_turn() -> None:
    messages = [{"role": "user", "content": "Weather in Seoul for 3 days?"},
                assistant_calls(("get_weather", {"city": "Seoul, South Korea", "days": 3}))]
    v = check_messages(messages, [SEOUL], tools=TOOLS)
    assert (v.status, v.score, v.details["format"]) == (Status.OK, 1.0, "tool_calls")
    messages.append({"role": "tool", "tool_call_id": "c0", "content": "sunny"})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "It will be sunny."}]})
    v = check_messages(messages, [SEOUL], tools=TOOLS)
    assert v.status == Status.NO_ANSWER and v.reason == "no tool call found"


@pytest.mark.parametrize("args, ok, kind", [
    ({"city": "Seoul"}, True, "optional arguments may be left out where the answer allows"),
    ({"city": "SEOUL", "days": 3, "units": "C"}, True, "strings compare case-insensitively"),
    ({"city": "Seoul South-Korea"}, True, "BFCL's normalisation drops spaces and ,./-_*^"),
    ({"city": "Busan", "days": 3}, False, "wrong value"),
    ({"days": 3}, False, "missing required argument"),
    ({"city": "Seoul", "days": 3, "lang": "ko"}, False, "unknown argument"),
    ({"city": "Seoul", "days": 3.0}, False, "a float is not an integer"),
    ({"city": "Seoul", "days": True}, False, "a bool is not an integer"),
    ({"city": "Seoul", "days": "3"}, False, "a string is not an integer"),
])
def test_bfcl_argument_rules(args: dict[str, Any], ok: bool, kind: str) -> None:
    v = check(hermes(("get_weather", args)), ref([SEOUL]))
    assert v.score == float(ok), (kind, v.reason)
    assert v.details["accepted"] is ok


def test_int_passes_for_float_and_nested_values_compare_element_wise() -> None:
    answer = {"get_weather": {"city": ["Oslo"], "temp": [20.0], "tags": [["Rain", "wind"]],
                              "opts": [{"metric": [True], "source": ["met.no", ""]}]}}
    good = {"city": "Oslo", "temp": 20, "tags": ["rain", "Wind"], "opts": {"metric": True}}
    assert check(hermes(("get_weather", good)), ref([answer])).score == 1.0
    for bad in ({**good, "tags": ["wind", "rain"]}, {**good, "tags": ["rain"]},
                {**good, "opts": {"metric": False}}, {**good, "opts": {"metric": True, "x": 1}},
                {**good, "temp": 20.5}, {**good, "tags": "rain, wind"}):
        assert check(hermes(("get_weather", bad)), ref([answer])).score == 0.0, bad


def test_parallel_calls_in_any_order_and_missing_extra_wrong_calls() -> None:
    answers = [{"math.factorial": {"number": [5]}}, {"math.factorial": {"number": [7]}},
               {"get_weather": {"city": ["Lima"]}}]
    right = [("get_weather", {"city": "lima"}), ("math.factorial", {"number": 7}), ("math.factorial", {"number": 5})]
    assert check(hermes(*right), ref(answers)).score == 1.0
    assert check("[" + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in right) + "]",
                 ref(answers)).score == 1.0
    cases = {"missing": right[:2], "extra": [*right, right[0]], "wrong": [right[0], right[1], ("math.factorial",
                                                                                              {"number": 6})],
             "other_function": [("get_weather", {"city": "Lima"}), ("math.factorial", {"number": 7}),
                                ("get_weather", {"city": "Lima"})]}
    for name, calls in cases.items():
        v = check(hermes(*calls), ref(answers))
        assert v.score == 0.0 and not v.details["accepted"], name
    v = check(hermes(*cases["wrong"]), ref(answers))
    failed = [p for p in v.details["matching"] if not p["ok"]]
    assert len(failed) == 1 and "'number'" in failed[0]["error"]


def test_dotted_names_keep_their_dots_in_text_but_may_be_underscored_by_an_api() -> None:
    answers = [{"math.factorial": {"number": [5]}}]
    assert check("[math.factorial(number=5)]", ref(answers)).score == 1.0
    assert check("[math_factorial(number=5)]", ref(answers)).score == 0.0
    api = [{"role": "user", "content": "5!"}, assistant_calls(("math_factorial", {"number": 5}))]
    assert check_messages(api, answers, tools=TOOLS).score == 1.0
    renamed = [{**MATH, "name": "math_factorial"}]
    assert check("[math_factorial(number=5)]", ref(answers, renamed)).score == 1.0


def test_python_arguments_read_like_bfcls_decoder() -> None:
    answer = [{"f": {"s": ["ab"], "n": [1024], "x": [-0.5], "t": [[1, 2]]}}]
    assert check('[f(s="a" + "b", n=2**10, x=-1/2, t=(1, 2))]', answer).score == 1.0
    assert check("[f(s=ab, n=1024, x=-0.5, t=[1, 2])]", answer).score == 1.0  # a bare name is its text


def test_exact_call_reference_and_no_spec() -> None:
    exact = [{"name": "book", "arguments": {"room": "A-1", "nights": 2, "guests": ["ann", "bo"]}}]
    assert check('[book(room="a1", nights=2, guests=["Ann", "Bo"])]', exact).score == 1.0
    assert check('[book(room="A-1", nights=2)]', exact).score == 0.0
    assert check('[book(room="A-1", nights=2, guests=["ann", "bo"], late=True)]', exact).score == 0.0


def test_irrelevance_no_call_is_right() -> None:
    assert check("None of these tools can compute a triangle's area.", []).score == 1.0
    assert check("[]", []).score == 1.0
    assert check('<tool_call>{"name": "get_weather", "arguments": {</tool_call>', []).score == 1.0
    assert check("[area(r=math.pi)]", []).score == 1.0  # BFCL's decoder fails on an attribute: no call
    v = check(hermes(("get_weather", {"city": "x"})), ref([]))
    assert (v.status, v.score) == (Status.OK, 0.0)


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Seoul",}}\n</tool_call>',
    '{"name": "get_weather", "arguments": "{\\"city\\": \\"Seoul\\""}',
    '[get_weather(city="Seoul"',
    "[get_weather(city=open('/etc/passwd').read())]",
    "[get_weather(city=__import__('os').system('true'))]",
    "[get_weather(**{'city': 'Seoul'})]",
])
def test_malformed_calls_score_zero_and_nothing_runs(text: str) -> None:
    v = check(text, ref([SEOUL]))
    assert v.status in (Status.NO_ANSWER, Status.OK) and v.score == 0.0
    if "open(" in text or "__import__" in text:  # a call without keywords is kept as its text, never run
        assert v.status == Status.OK and "is not one of" in v.reason
    else:
        assert v.status == Status.NO_ANSWER and v.details["parse_error"] and v.details["components"]["format"] == 0


def test_malformed_json_arguments_name_the_error() -> None:
    messages = [{"role": "user", "content": "Seoul?"}, assistant_calls(("get_weather", '{"city": "Seoul"'))]
    v = check_messages(messages, [SEOUL], tools=TOOLS)
    assert v.status == Status.NO_ANSWER and v.score == 0.0
    assert "invalid JSON" in v.reason and v.details["parse_error"].startswith("invalid JSON")


def test_partial_credit_is_f1_of_a_maximum_matching() -> None:
    answers = [{"math.factorial": {"number": [5, 6]}}, {"math.factorial": {"number": [5]}}]
    # Greedy matching in reference order takes the 5 for the first answer and leaves the 6 unmatched: BFCL says no,
    # the maximum matching pairs both.
    calls = [("math.factorial", {"number": 5}), ("math.factorial", {"number": 6})]
    v = check(hermes(*calls), ref(answers), partial=True)
    assert v.details["accepted"] is False and v.details["matched"] == 2 and v.score == 1.0
    v = check(hermes(calls[0], ("math.factorial", {"number": 9}), ("get_weather", {"city": "x"})), ref(answers),
              partial=True)
    assert v.score == pytest.approx(2 * 1 / (3 + 2))
    comps = v.details["components"]
    assert comps["format"] == 1.0 and comps["names"] == pytest.approx(2 / 3)
    assert comps["argument_keys"] == pytest.approx(2 / 3) and comps["values"] == pytest.approx(1 / 3)


def test_per_turn_reference_sets_turn_scores() -> None:
    turns = {"turns": [[{"get_weather": {"city": ["Oslo"]}}], [{"math.factorial": {"number": [3]}}], []],
             "tools": TOOLS}
    messages = [
        {"role": "user", "content": "Weather in Oslo, then 3!"},
        assistant_calls(("get_weather", {"city": "Oslo"})),
        {"role": "tool", "tool_call_id": "c0", "content": "rain"},
        assistant_calls(("math.factorial", {"number": 4})),
        {"role": "tool", "tool_call_id": "c0", "content": "24"},
        {"role": "assistant", "content": "Rain in Oslo; 3! is 6."},
    ]
    v = check_messages(messages, turns)
    assert v.turn_scores == [1.0, 0.0, 1.0] and v.score == 0.0
    assert v.details["turns"][1]["matching"][0]["ok"] is False
    v = check_messages(messages, turns, partial=True)
    assert v.score == pytest.approx(2 / 3)
    v = check_messages(messages[:2], turns)
    assert v.turn_scores == [1.0] and v.score == 0.0 and v.details["missing_turns"] == 2


@pytest.mark.parametrize("reference", [{"x": 1}, "get_weather", [{"a": 1, "b": 2}], {"turns": []},
                                       [{"name": "f", "arguments": [1]}]])
def test_unusable_reference_is_invalid_reference(reference: Any) -> None:
    from verifiers.types import InvalidReference
    with pytest.raises(InvalidReference):
        check("[f(a=1)]", reference)


def test_oversized_reference_is_refused_before_any_matching() -> None:
    from verifiers.types import InvalidReference
    many = [{"f": {"a": list(range(5000))}}]
    long = [{"f": {"a": ["x" * 70_000]}}]
    for reference in (many, long):
        with pytest.raises(InvalidReference, match="over"):
            check("[f(a=1)]", reference)


HOSTILE = [
    "[" * 200_000,
    '{"name": "f", "arguments": ' + '{"a": ' * 50_000 + "1" + "}" * 50_001,
    "<tool_call>" + '{"name": "f", "arguments": {"a": [' + "[" * 3000 + "]" * 3000 + "]}}</tool_call>",
    "[f(a=" + "(" * 5000 + "1" + ")" * 5000 + ")]",
    "[f(a=" + "9" * 100_000 + ")]",
    '{"name": "f", "arguments": {"a": ' + "9" * 100_000 + "}}",
    "[f(a=2**10**10)]",
    "[f(a=9e300*9e300*9e300)]",
    "<tool_call>{}</tool_call>" * 10_000,
    '[f(a="\ud800\u202e\x00\U0010ffff")]',
    '{"name": "f\u0000", "arguments": {"\ud800": "\udfff"}}',
    "[f(a=1)]" + " " * 2_000_000,
    "[" + ", ".join(f"f(a={i})" for i in range(5000)) + "]",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_outputs_get_a_score_quickly(text: str) -> None:
    started = time.perf_counter()
    v = check(text, ref([{"f": {"a": [1]}}], []))
    elapsed = time.perf_counter() - started
    assert v.status in (Status.OK, Status.NO_ANSWER) and v.score is not None, v.reason
    json.dumps(v.to_dict())  # the verdict can be sent back whatever the output held
    assert elapsed < 5, f"{elapsed:.1f}s"  # bound on work, not a speed figure: a blow-up takes minutes


def test_messages_reach_the_verifier_through_the_worker_pool() -> None:
    messages = [{"role": "user", "content": "Seoul weather"},
                assistant_calls(("get_weather", {"city": "Seoul", "days": 3}))]
    turns = {"turns": [[{"get_weather": {"city": ["Seoul"], "days": [3]}}]], "tools": TOOLS}

    async def run() -> list[Verdict]:
        async with local_engine(["verifiers.kinds.tool_calls"]) as engine:
            return await engine.verify_many([
                VerifyItem("tool_calls", "", [SEOUL], messages=messages, tools=TOOLS),
                VerifyItem("tool_calls", "", turns, messages=messages),
                VerifyItem("tool_calls", '[get_weather(city="Seoul")]', [SEOUL]),
            ])

    verdicts = asyncio.run(run())
    assert [(v.status, v.score) for v in verdicts] == [(Status.OK, 1.0)] * 3
    assert verdicts[0].details["format"] == "tool_calls" and verdicts[1].turn_scores == [1.0]


def test_parse_text_reports_prose_as_no_call() -> None:
    parsed = parse_text("The answer is 42.", 1000)
    assert parsed.ok and parsed.calls == [] and parsed.format == "none"
