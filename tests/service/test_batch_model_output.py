"""``reward-service score`` (embedded and through a server) and the labelled audit score what a model wrote, however
empty or broken: vLLM's empty final turns, garbage calls, and text completions with their tool specs in a ``tools``
column are scored rows; only a row malformed as a request (a role no chat API has) is an error row."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.support.batch import run_score
from tests.support.server import LiveServer
from tests.support.tool_calls import as_hermes, as_python, canonical, load_entries


def bfcl_rows(shared_data: Path) -> list[dict[str, Any]]:
    simple = {e.id: e for e in load_entries(shared_data / "tools", "simple_python")}
    irrelevant = load_entries(shared_data / "tools", "irrelevance")[3]
    e17, e0 = simple["simple_python_17"], simple["simple_python_0"]
    (name, args), = canonical(e17, random.Random(0))
    no_formatted = [(name, {k: v for k, v in args.items() if k != "formatted"})]
    tools17 = [{"type": "function", "function": f} for f in e17.functions]
    tools0 = [{"type": "function", "function": f} for f in e0.functions]
    question = {"role": "user", "content": "Use a function if one applies."}

    def turn(**fields: Any) -> list[dict[str, Any]]:
        return [question, {"role": "assistant", **fields}]

    return [
        # text completions with the tool specs beside them: the spec requires `formatted`
        {"id": "hermes_missing_required", "response": as_hermes(no_formatted), "tools": tools17,
         "reference": e17.ground_truth, "expected": ("ok", 0.0)},
        {"id": "python_right", "response": as_python(canonical(e17, random.Random(0))), "tools": tools17,
         "reference": e17.ground_truth, "expected": ("ok", 1.0)},
        # empty turns, as vLLM returns them
        {"id": "empty_no_call_needed", "messages": turn(content=None, tool_calls=[], reasoning_content="None fits."),
         "tools": [{"type": "function", "function": f} for f in irrelevant.functions],
         "reference": irrelevant.ground_truth, "expected": ("ok", 1.0)},
        {"id": "empty_call_needed", "messages": turn(content=None, tool_calls=None), "tools": tools0,
         "reference": e0.ground_truth, "expected": ("no_answer", 0.0)},
        # garbage calls
        {"id": "arguments_not_json", "messages": turn(content=None, tool_calls=[
            {"id": "c", "type": "function", "function": {"name": e0.functions[0]["name"], "arguments": "{base: 10"}}]),
         "tools": tools0, "reference": e0.ground_truth, "expected": ("no_answer", 0.0)},
        {"id": "huge_name", "messages": turn(content=None, tool_calls=[
            {"type": "function", "function": {"name": "x" * 10_000, "arguments": {}}}]),
         "tools": tools0, "reference": e0.ground_truth, "expected": ("ok", 0.0)},
        # malformed as a request
        {"id": "bad_role", "messages": [question, {"role": "robot", "content": "hi"}], "reference": [],
         "expected": ("error", None)},
    ]


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_score_rows_of_empty_and_broken_outputs(tmp_path: Path, shared_data: Path, server: LiveServer,
                                                where: str) -> None:
    rows = bfcl_rows(shared_data)
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "expected"}) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    done = run_score(inp, out, "--verifier", "tool_calls", *(["--url", server.url] if where == "server" else []))
    assert done.returncode == 0, done.stderr
    got = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert len(got) == len(rows)
    for r in rows:
        assert (got[r["id"]]["status"], got[r["id"]]["score"]) == r["expected"], got[r["id"]]
    assert "missing required argument 'formatted'" in got["hermes_missing_required"]["reason"]
    assert "role" in got["bad_role"]["reason"]


def test_the_audit_scores_empty_turns_and_text_with_tools(server: LiveServer, shared_data: Path) -> None:
    rows = [{k: v for k, v in r.items() if k not in ("expected",)} | {"label": r["expected"][1] == 1.0}
            for r in bfcl_rows(shared_data) if r["id"] != "bad_role"]
    with server.client() as client:
        r = client.post("/v1/audit", json={"kind": "labelled", "verifier": "tool_calls", "items": rows})
        assert r.status_code == 200, r.text
        report = r.json()
        assert report["confusion"] == {"tp": 2, "fp": 0, "tn": 4, "fn": 0}, report
        assert report["statuses"] == {"ok": 4, "no_answer": 2}, report
        bad = client.post("/v1/audit", json={"kind": "labelled", "verifier": "tool_calls",
                                             "items": [rows[0], {**rows[0], "tools": ["not a spec"]}]})
        assert bad.status_code == 422 and bad.json()["loc"][:3] == ["items", 1, "tools"], bad.text
