"""Running ``reward-service score`` as a user would (its environment, command line, JSONL files) and stopping it
as a crash would."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.server import ROOT, TEST_PLUGINS


def score_groups_whole(tmp_path: Path, *args: str) -> None:
    """Three groups of 4 rows with ``--chunk-size 3``: each group outgrows a chunk. ``args`` pick the scorer."""
    answers = {"p1": ["12", "\\boxed{12}", "12.0", "13"], "p2": ["1/2", "0.5", "7", "8"], "p3": ["9", "9", "9", "9"]}
    rows = [{"id": f"{p}-{i}", "prompt_id": p, "response": f"The answer is {a}."}
            for p, values in answers.items() for i, a in enumerate(values)]
    out = tmp_path / "out.jsonl"
    done = run_score(write_jsonl(tmp_path / "in.jsonl", rows), out, "--verifier", "consensus",
                     "--group-field", "prompt_id", "--chunk-size", "3", *args)
    assert done.returncode == 0, done.stderr
    got = {r["id"]: r for r in read_jsonl(out)}
    assert [got[f"p1-{i}"]["score"] for i in range(4)] == [1.0, 1.0, 1.0, 0.0]
    assert {got[f"p2-{i}"]["status"] for i in range(4)} == {"no_consensus"}
    assert [got[f"p3-{i}"]["score"] for i in range(4)] == [1.0] * 4
    assert got["p1-0"]["details"]["votes"] == 4


def cli_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "REWARD_SERVICE_EXTRA_VERIFIER_MODULES": f'["{TEST_PLUGINS}"]',
        "REWARD_SERVICE_LOG_LEVEL": "WARNING",
    }


def score_cmd(inp: Path, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "reward_service", "score", str(inp), "--out", str(out), "--workers", "2", *args]


def run_score(inp: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(score_cmd(inp, out, *args), env=cli_env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def with_group_killed(proc: subprocess.Popen[str]) -> None:
    """Our own process group (the killed CLI's worker processes), so no orphan outlives the test."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
