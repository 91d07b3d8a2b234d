"""`reward-service score --ray` on a local Ray instance: same rows and verdicts as the embedded run, resumable."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")


def write_rows(path: Path, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        # Mixed reference types on purpose: Arrow cannot infer one schema for them.
        reference = {"not": "usable"} if i % 7 == 0 else str(i % 3)
        rows.append({"id": f"r{i}", "response": str(i % 2), "reference": reference, "extra": i})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def score(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAY_DISABLE_IMPORT_WARNING": "1", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    return subprocess.run([sys.executable, "-m", "reward_service", "score", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=540)


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_ray_scoring_matches_embedded_and_resumes(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "in.jsonl", 240)
    common = ["--verifier", "exact_match", "--workers", "1", "--chunk-size", "40"]
    embedded = score([str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "embedded.jsonl"), *common], tmp_path)
    assert embedded.returncode == 0, embedded.stderr

    # An interrupted earlier run: the first 80 rows committed, then a torn line.
    expected = read(tmp_path / "embedded.jsonl")
    out = tmp_path / "ray.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in expected[:80]) + '{"id": "r80", "resp')
    r = score([str(tmp_path / "in.jsonl"), "--out", str(out), *common, "--ray", "--ray-actors", "1"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resuming: 80 of 240" in r.stderr
    got = read(out)
    assert [g["id"] for g in got] == [row["id"] for row in rows]  # every row exactly once, in input order
    strip = lambda rows: [{k: v for k, v in row.items() if k != "details"} for row in rows]  # noqa: E731
    assert strip(got) == strip(expected)
    statuses = {g["status"] for g in got}
    assert statuses == {"ok", "invalid_reference"}
    assert sum(1 for g in got if g["score"] == 1.0) == sum(
        1 for row in rows if not isinstance(row["reference"], dict) and row["response"] == row["reference"])


def test_ray_cannot_be_combined_with_url(tmp_path: Path) -> None:
    write_rows(tmp_path / "in.jsonl", 3)
    r = score([str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o.jsonl"), "--verifier", "exact_match",
               "--ray", "--url", "http://127.0.0.1:9"], tmp_path)
    assert r.returncode != 0 and "--ray" in (r.stderr + r.stdout)
