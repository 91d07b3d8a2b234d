"""The ifeval verifier through the real server: scores, details, named statuses and option errors over HTTP."""
from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.support.server import LiveServer


def verify(server: LiveServer, items: list[dict]) -> httpx.Response:
    with server.client() as c:
        return c.post("/v1/verify", json={"items": items})


def test_ifeval_batch_with_modes_and_bad_reference(server: LiveServer) -> None:
    ref = {"instruction_id_list": ["punctuation:no_comma", "detectable_format:title"], "kwargs": [{}, {}]}
    response = "Sure, here you go:\n<<A Title>>\nno commas at all"
    items = [
        {"id": "strict", "verifier": "ifeval", "response": response, "reference": ref},
        {"id": "loose", "verifier": "ifeval", "response": response, "reference": ref, "options": {"mode": "loose"}},
        {"id": "unknown", "verifier": "ifeval", "response": response,
         "reference": {"instruction_id_list": ["made:up"], "kwargs": [{}]}},
        {"id": "empty", "verifier": "ifeval", "response": "", "reference": ref},
    ]
    r = verify(server, items)
    assert r.status_code == 200, r.text
    by_id = {x["id"]: x for x in r.json()["results"]}
    assert by_id["strict"]["status"] == "ok" and by_id["strict"]["score"] == 0.5
    assert by_id["strict"]["details"]["instructions"] == [
        {"id": "punctuation:no_comma", "followed": False}, {"id": "detectable_format:title", "followed": True}]
    assert by_id["strict"]["details"]["all_followed"] is False
    assert by_id["loose"]["score"] == 1.0 and by_id["loose"]["details"]["all_followed"] is True
    assert by_id["unknown"]["status"] == "invalid_reference" and by_id["unknown"]["score"] is None
    assert "made:up" in by_id["unknown"]["reason"]
    assert by_id["empty"]["status"] == "no_answer" and by_id["empty"]["score"] == 0.0


def test_ifeval_bad_mode_is_422(server: LiveServer) -> None:
    r = verify(server, [{"verifier": "ifeval", "response": "x", "options": {"mode": "lenient"},
                         "reference": {"instruction_id_list": ["punctuation:no_comma"]}}])
    assert r.status_code == 422
    assert "mode" in r.text


def test_ifeval_real_responses_match_reference_over_http(server: LiveServer, shared_data: Path) -> None:
    root = shared_data / "ifeval"
    inputs = {json.loads(x)["prompt"]: json.loads(x) for x in (root / "input_data.jsonl").open()}
    responses = {json.loads(x)["prompt"]: json.loads(x)["response"]
                 for x in (root / "input_response_data_gpt4.jsonl").open()}
    expected = [json.loads(x) for x in (root / "eval_results_loose.jsonl").open()][:40]
    items = [{"id": str(i), "verifier": "ifeval", "response": responses[row["prompt"]], "options": {"mode": "loose"},
              "reference": {k: inputs[row["prompt"]][k] for k in ("instruction_id_list", "kwargs")}}
             for i, row in enumerate(expected)]
    r = verify(server, items)
    assert r.status_code == 200, r.text
    for row, result in zip(expected, r.json()["results"]):
        assert result["status"] == "ok"
        assert [x["followed"] for x in result["details"]["instructions"]] == row["follow_instruction_list"]
