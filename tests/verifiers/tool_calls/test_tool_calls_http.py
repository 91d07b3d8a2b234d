"""The tool_calls verifier through the real server: generated text in ``response``, BFCL references with their tool
specs, hostile outputs in the same batch, and named statuses for what cannot be scored."""
from __future__ import annotations

import json
import random
from pathlib import Path

import httpx

from tests.support.server import LiveServer
from tests.support.tool_calls import as_hermes, as_python, canonical, load_entries

SPEC = [{"name": "spotify.play", "parameters": {"type": "dict", "properties": {
    "artist": {"type": "string"}, "duration": {"type": "integer"}}, "required": ["artist", "duration"]}}]
ANSWER = [{"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}},
          {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}}]
REFERENCE = {"calls": ANSWER, "tools": SPEC}


def verify(server: LiveServer, items: list[dict]) -> httpx.Response:
    with server.client() as c:
        return c.post("/v1/verify", json={"items": items})


def test_tool_calls_batch_over_http(server: LiveServer) -> None:
    hermes = ('<tool_call>\n{"name": "spotify.play", "arguments": {"artist": "Maroon 5", "duration": 15}}\n'
              '</tool_call>\n<tool_call>\n{"name": "spotify.play", "arguments": {"artist": "taylor swift", '
              '"duration": 20}}\n</tool_call>')
    items = [
        {"id": "hermes", "response": hermes},
        {"id": "python", "response": '[spotify.play(artist="Taylor Swift", duration=20), '
                                     'spotify.play(artist="Maroon 5", duration=15)]'},
        {"id": "one_missing", "response": '[spotify.play(artist="Taylor Swift", duration=20)]'},
        {"id": "partial", "response": '[spotify.play(artist="Taylor Swift", duration=20)]',
         "options": {"partial": True}},
        {"id": "malformed", "response": '<tool_call>\n{"name": "spotify.play", "arguments": {"artist": }\n'
                                        '</tool_call>'},
        {"id": "prose", "response": "Sure, playing them now!"},
        {"id": "nested", "response": "[" * 500_000},
        {"id": "irrelevant", "response": "No tool fits.", "reference": []},
        {"id": "bad_reference", "reference": {"nothing": 1}, "response": "[f()]"},
    ]
    for item in items:
        item.setdefault("reference", REFERENCE)
        item["verifier"] = "tool_calls"
    r = verify(server, items)
    assert r.status_code == 200, r.text
    by_id = {x["id"]: x for x in r.json()["results"]}
    assert (by_id["hermes"]["status"], by_id["hermes"]["score"]) == ("ok", 1.0)
    assert by_id["hermes"]["details"]["format"] == "hermes"
    assert (by_id["python"]["score"], by_id["python"]["details"]["format"]) == (1.0, "python")
    assert by_id["one_missing"]["score"] == 0.0 and "1 calls where 2 are expected" in by_id["one_missing"]["reason"]
    assert by_id["partial"]["score"] == 2 / 3
    assert by_id["malformed"]["status"] == "no_answer" and "invalid JSON" in by_id["malformed"]["reason"]
    assert by_id["prose"]["status"] == "no_answer" and by_id["prose"]["reason"] == "no tool call found"
    assert by_id["nested"]["status"] == "no_answer" and by_id["nested"]["score"] == 0.0
    assert (by_id["irrelevant"]["status"], by_id["irrelevant"]["score"]) == ("ok", 1.0)
    assert by_id["bad_reference"]["status"] == "invalid_reference" and by_id["bad_reference"]["score"] is None


def test_tool_calls_bad_option_is_422(server: LiveServer) -> None:
    r = verify(server, [{"verifier": "tool_calls", "response": "[f()]", "reference": [],
                         "options": {"partial": "sometimes"}}])
    assert r.status_code == 422 and "partial" in r.text


def test_tool_calls_bfcl_entries_over_http(server: LiveServer, shared_data: Path) -> None:
    tools_dir = shared_data / "tools"
    entries = load_entries(tools_dir, "parallel_multiple")[:40]
    items = []
    for e in entries:
        calls = canonical(e, random.Random(0))
        ref = {"calls": e.ground_truth, "tools": e.functions}
        items.append({"verifier": "tool_calls", "response": as_hermes(calls), "reference": ref})
        items.append({"verifier": "tool_calls", "response": as_python(calls[::-1]), "reference": ref,
                      "options": {"partial": True}})
        items.append({"verifier": "tool_calls", "response": as_python(calls[:-1]), "reference": ref})
    r = verify(server, items)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert all(x["status"] in ("ok", "no_answer") for x in results), json.dumps(results)[:500]
    right, reordered, short = results[0::3], results[1::3], results[2::3]
    assert sum(x["score"] == 1.0 for x in right) >= 0.9 * len(entries)
    assert sum(x["score"] == 1.0 for x in reordered) >= 0.9 * len(entries)
    assert all(x["score"] == 0.0 for x in short)
