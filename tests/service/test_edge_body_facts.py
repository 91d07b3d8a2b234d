"""The edge clears a body's numbers and surrogates once from its raw bytes (``BodyFacts``) before skipping those
checks per item: every way a number overflows or a surrogate arrives in JSON must still fail the raw test and be a
422 naming the field, under the default limits, while bodies that only look suspicious are scored."""
from __future__ import annotations

import json

import httpx
import pytest

from reward_service.schemas.item_limits import BodyFacts
from tests.support.server import LiveServer

ITEM = '{"verifier": "exact_match", "response": "42", "reference": %s}'


def post_raw(server: LiveServer, raw: bytes) -> httpx.Response:
    with server.client() as client:
        return client.post("/v1/verify", content=raw, headers={"content-type": "application/json"})


OVERFLOWS = {
    "309 digits before the point": "[1, 1" + "0" * 309 + ".5]",
    "216 digits and a two-digit exponent": "[1, 1" + "0" * 215 + "e99]",
    "three-digit exponent": "[1, 9e308]",
    "negative, capital E": "[1, -2E+308]",
    "NaN": "[1, NaN]",
    "-Infinity": "[1, -Infinity]",
}


@pytest.mark.parametrize("name", list(OVERFLOWS))
def test_every_overflowing_number_fails_the_raw_test_and_is_named(server: LiveServer, name: str) -> None:
    raw = ('{"items": [' + ITEM % '"42"' + ", " + ITEM % OVERFLOWS[name] + "]}").encode()
    assert BodyFacts.of(raw, 1000).odd_numbers
    r = post_raw(server, raw)
    assert r.status_code == 422, r.text
    assert r.json()["loc"] == ["items", 1, "reference", 1] and "finite" in r.json()["detail"], r.text


SURROGATES = {
    "escaped high": b'"\\ud800x"',
    "escaped low, capitals": b'"x\\uDC00"',
    "raw bytes": b'"x\xed\xa0\x80"',
}


@pytest.mark.parametrize("name", list(SURROGATES))
def test_every_lone_surrogate_fails_the_raw_test_and_is_named(server: LiveServer, name: str) -> None:
    raw = b'{"items": [' + (ITEM % "[1, %s]").encode() % SURROGATES[name] + b"]}"
    assert BodyFacts.of(raw, 1000).surrogates
    r = post_raw(server, raw)
    assert r.status_code == 422, r.text
    assert r.json()["loc"] == ["items", 0, "reference", 1], r.text


def test_bodies_that_only_look_suspicious_are_scored(server: LiveServer) -> None:
    """An emoji written as an escaped surrogate pair, a 199-digit integer, "NaN" and "1e100" in text, a literal
    backslash before "ud800": the raw tests flag some of them; the per-item checks then clear them."""
    items = [
        {"verifier": "exact_match", "response": "\U0001F600 NaN e100 \\ud800",
         "reference": "\U0001F600 nan e100 \\ud800"},
        {"verifier": "exact_match", "response": "7", "reference": [7, int("9" * 199), 1e100, -2.5e-300]},
    ]
    raw = json.dumps({"items": items}).encode()  # ASCII escapes: the emoji is \ud83d\ude00
    facts = BodyFacts.of(raw, 1000)
    assert facts.surrogates and facts.odd_numbers
    r = post_raw(server, raw)
    assert r.status_code == 200, r.text
    assert [x["score"] for x in r.json()["results"]] == [1.0, 1.0], r.text
    clean = json.dumps({"items": [{"verifier": "exact_match", "response": "7", "reference": [7, 1.5e10]}]})
    assert BodyFacts.of(clean.encode(), 1000) == BodyFacts(False, False)


# A field's size is measured as the json module writes it (", " and ": " separators, non-ASCII as escapes), while
# the edge reads the compact orjson text first: values whose two sizes differ most must meet the limit exactly.
WIDE_VALUES = {
    "separators": [{"a": 1, "b": [1, 2, 3]} for _ in range(40)],
    "two-byte characters": ["é" * 300],
    "four-byte characters": ["\U0001F600" * 200],
    "line separators": ["\u2028" * 300],
    "floats with exponents": [1e16, 1e-7, 2.5e-300] * 50,
}


@pytest.mark.parametrize("name", list(WIDE_VALUES))
def test_sizes_are_the_json_modules_at_the_limit_and_one_past_it(name: str) -> None:
    from reward_service.schemas.item_limits import _compact, size_over

    value = WIDE_VALUES[name]
    exact = len(json.dumps(value))
    compact = _compact(value)
    assert compact is not None and len(compact) < exact  # the two texts differ: the bound is what is tested
    assert exact <= 3 * len(compact)
    assert size_over(value, exact, compact) is None
    assert size_over(value, exact - 1, compact) == exact


def test_tools_one_character_over_their_limit_are_refused_with_non_ascii_specs() -> None:
    from reward_service.errors import ApiError
    from reward_service.schemas.item_limits import check_item
    from reward_service.schemas.verify import VerifyItemIn
    from reward_service.settings import LimitsSettings

    tools = [{"type": "function", "function": {"name": "météo", "description": "prévision " * 50,
                                                  "parameters": {"type": "object", "properties": {}}}}]
    size = len(json.dumps(tools))
    item = VerifyItemIn(verifier="tool_calls", response="[]", reference=[], tools=tools)
    check_item(LimitsSettings(max_tools_chars=size), 0, item)
    with pytest.raises(ApiError) as err:
        check_item(LimitsSettings(max_tools_chars=size - 1), 0, item)
    assert err.value.loc == ["items", 0, "tools"] and str(size) in err.value.message


def test_nesting_is_read_from_brackets_outside_strings() -> None:
    from reward_service.schemas.item_limits import MAX_NESTING, _compact, too_deep

    deep: object = "x"
    for _ in range(MAX_NESTING + 1):
        deep = [deep]
    assert too_deep(deep, _compact(deep)) == MAX_NESTING + 1
    shallow = {"text": "[" * 500 + "{" * 500, "list": [[1]] * 100}  # brackets in strings and many side by side
    assert too_deep(shallow, _compact(shallow)) is None
    at_limit: object = 1
    for _ in range(MAX_NESTING):
        at_limit = [at_limit]
    assert too_deep(at_limit, _compact(at_limit)) is None
