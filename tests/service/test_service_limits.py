"""String and number limits at the edge (issue 22): over-long responses, references and options are a 413, huge ids
and groups, over-long verifier names, non-finite numbers and integers of too many digits a 422, each naming the
field; values at the defaults real rollouts produce (long chain-of-thought responses) pass."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.server import LiveServer, run_server

NORMAL = {"verifier": "math", "response": "The answer is $\\boxed{42}$.", "reference": "42"}
SMALL = {"REWARD_SERVICE_WORKERS": "1", "REWARD_SERVICE_MAX_RESPONSE_CHARS": "5000",
         "REWARD_SERVICE_MAX_REFERENCE_CHARS": "500", "REWARD_SERVICE_MAX_OPTIONS_CHARS": "300",
         "REWARD_SERVICE_MAX_ID_CHARS": "40", "REWARD_SERVICE_MAX_NUMBER_DIGITS": "30"}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server with small limits, so each case needs only a small body."""
    with run_server(tmp_path_factory.mktemp("limits"), SMALL) as live:
        yield live


def post(server: LiveServer, body: object) -> tuple[int, dict]:
    text = body if isinstance(body, str) else json.dumps(body)
    with server.client(timeout=60) as c:
        r = c.post("/v1/verify", content=text, headers={"content-type": "application/json"})
    return r.status_code, r.json()


@pytest.mark.parametrize("field,value,status", [
    ("response", "x" * 5001, 413),
    ("reference", "4" * 501, 413),
    ("reference", ["4" * 300, "2" * 300], 413),
    ("options", {"tail_chars": 1000, "x": "y" * 300}, 413),
    ("id", "i" * 41, 422),
    ("group", "g" * 41, 422),
])
def test_over_long_values_are_refused_naming_the_field(small: LiveServer, field: str, value: object,
                                                        status: int) -> None:
    code, body = post(small, {"items": [NORMAL, {**NORMAL, field: value}]})
    assert code == status, body
    assert body["loc"][:3] == ["items", 1, field] and f"items[1].{field}" in body["detail"], body
    assert body["request_id"]


@pytest.mark.parametrize("raw,loc", [
    ('{"reference": 1e999}', ["reference"]),
    ('{"reference": [1, -1e400]}', ["reference", 1]),
    ('{"reference": NaN}', ["reference"]),
    ('{"reference": 1234567890123456789012345678901}', ["reference"]),
    ('{"reference": "42", "options": {"timeout_s": Infinity}}', ["options", "timeout_s"]),
    ('{"reference": {"answer": [1, 99999999999999999999999999999999999]}}', ["reference", "answer", 1]),
])
def test_numbers_too_large_are_422_naming_the_field(small: LiveServer, raw: str, loc: list) -> None:
    code, body = post(small, '{"items": [{"verifier": "math", "response": "The answer is 42.", ' + raw[1:-1] + '}]}')
    assert code == 422, body
    assert body["loc"] == ["items", 0, *loc], body


def test_an_integer_past_pythons_digit_limit_is_422_not_400(small: LiveServer) -> None:
    code, body = post(small, '{"items": [{"verifier": "math", "response": "1", "reference": ' + "9" * 5000 + "}]}")
    assert code == 422 and "as a string" in body["detail"] and body["request_id"], body


def test_values_at_the_limits_are_scored(small: LiveServer) -> None:
    item = {**NORMAL, "id": "i" * 40, "group": "g" * 40, "response": "x" * 4900 + " The answer is $\\boxed{42}$.",
            "reference": 123456789012345678901234567890, "options": {"tail_chars": 1000}}
    code, body = post(small, {"items": [item, NORMAL]})
    assert code == 200, body
    assert [r["score"] for r in body["results"]] == [0.0, 1.0] and body["results"][0]["id"] == "i" * 40


def test_default_limits_pass_long_chain_of_thought(server: LiveServer) -> None:
    """Long-CoT rollouts of 100k+ characters are real: the defaults (1M characters) score them."""
    response = "Let me think step by step. " * 8000 + "The answer is $\\boxed{42}$."
    assert len(response) > 200_000
    code, body = post(server, {"items": [{**NORMAL, "response": response, "id": "rollout-0" * 10}]})
    assert code == 200 and body["results"][0]["score"] == 1.0, body
    code, body = post(server, {"items": [{**NORMAL, "verifier": "v" * 201}]})
    assert code == 422 and body["errors"][0]["loc"][-1] == "verifier" and len(json.dumps(body)) < 2000, body


def test_openrlhf_labels_get_the_same_limits(small: LiveServer) -> None:
    with small.client() as c:
        r = c.post("/openrlhf/reward", content='{"query": ["The answer is 42."], "labels": [1e999]}',
                   headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["loc"] == ["items", 0, "reference"], r.text
        ok = c.post("/openrlhf/reward", json={"query": ["The answer is 42."], "labels": ["42"]})
        assert ok.status_code == 200 and ok.json()["rewards"] == [1.0]
