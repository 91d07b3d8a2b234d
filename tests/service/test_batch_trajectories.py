"""``reward-service score`` over rollout files of trajectories (a ``messages`` field instead of ``response``):
embedded and through a server, the final turn scored, per-turn scores written, a bad trajectory an error row."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import ROOT, TEST_PLUGINS, LiveServer


def call(cid: str, expr: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "calculator", "arguments": json.dumps({"expr": expr})}}


def rows_for(shared_data: Path, n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with open(shared_data / "math" / "gsm8k.test.jsonl") as f:
        for line in f:
            record = json.loads(line)
            gold = record["answer"].split("####")[-1].strip().replace(",", "")
            wrong = str(int(gold) + 1)
            right_last = record["idx"] % 2 == 0  # every other trajectory ends on the wrong value
            first, last = (wrong, gold) if right_last else (gold, wrong)
            messages = [
                {"role": "user", "content": record["question"]},
                {"role": "assistant", "content": f"My first estimate is {first}.", "tool_calls": [call("c0", "1+1")]},
                {"role": "tool", "tool_call_id": "c0", "content": "2"},
                {"role": "assistant", "content": f"The answer is \\boxed{{{last}}}."},
            ]
            rows.append({"id": f"g{record['idx']}", "messages": messages, "reference": gold,
                         "expected": 1.0 if right_last else 0.0})
            if len(rows) == n:
                return rows
    return rows


def run_score(inp: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "REWARD_SERVICE_EXTRA_VERIFIER_MODULES": f'["{TEST_PLUGINS}"]', "REWARD_SERVICE_LOG_LEVEL": "WARNING"}
    cmd = [sys.executable, "-m", "reward_service", "score", str(inp), "--out", str(out), "--workers", "1", *args]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


BAD = [
    {"id": "orphan", "verifier": "math", "reference": "1", "messages": [
        {"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "nope", "content": "1"},
        {"role": "assistant", "content": "1"}]},
    {"id": "both", "verifier": "math", "reference": "1", "response": "1",
     "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "1"}]},
    {"id": "role", "verifier": "math", "reference": "1", "messages": [{"role": "robot", "content": "1"}]},
]


@pytest.mark.parametrize("where", ["embedded", "server", "ray"])
def test_trajectory_rows_score_their_final_turn(tmp_path: Path, shared_data: Path, server: LiveServer,
                                                where: str) -> None:
    if where == "ray":
        pytest.importorskip("ray")
    rows = [{**r, "verifier": "math"} for r in rows_for(shared_data, 6)]
    turns = {"id": "turns", "verifier": "test_turns", "messages": rows[0]["messages"],
             "tools": [{"type": "function", "function": {"name": "calculator"}}]}
    plain = {"id": "plain", "verifier": "math", "response": "\\boxed{3}", "reference": "3"}
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in [*rows, turns, plain, *BAD]))
    out = tmp_path / "out.jsonl"
    args = ["--verifier-field", "verifier", *{"embedded": [], "server": ["--url", server.url],
                                               "ray": ["--ray", "--ray-actors", "1"]}[where]]
    done = run_score(inp, out, *args)
    assert done.returncode == 0, done.stderr
    got = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    for r in rows:
        assert (got[r["id"]]["status"], got[r["id"]]["score"]) == ("ok" if r["expected"] else got[r["id"]]["status"],
                                                                   r["expected"]), got[r["id"]]
    assert got["turns"]["turn_scores"] == [1.0, 0.0] and got["turns"]["details"]["tools"] == ["calculator"]
    assert got["plain"]["score"] == 1.0 and got["plain"]["turn_scores"] is None
    for bad, words in (("orphan", "no earlier assistant tool call"), ("both", "both a response"),
                       ("role", "role")):
        assert got[bad]["status"] == "error" and got[bad]["score"] is None, got[bad]
        assert words in got[bad]["reason"], got[bad]["reason"]
