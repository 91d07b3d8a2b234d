"""``reward-service score``: the real command in a subprocess, embedded and against a server, killed and resumed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from reward_service.batch.rows import RowSpec, score_batch
from tests.support.batch import cli_env, read_jsonl, run_score, score_cmd, with_group_killed, write_jsonl
from tests.support.server import ROOT, LiveServer


def gsm8k_rows(shared_data: Path, n: int) -> list[dict]:
    rows = []
    with open(shared_data / "math" / "gsm8k.test.jsonl") as f:
        for line in f:
            record = json.loads(line)
            gold = record["answer"].split("####")[-1].strip()
            # Every third rollout answers wrong, so the scores are not all alike.
            response = gold if record["idx"] % 3 else str(int(gold.replace(",", "")) + 1)
            rows.append({"id": f"g{record['idx']}", "question": record["question"], "response": response,
                         "reference": gold})
            if len(rows) == n:
                break
    return rows


def test_embedded_jsonl_scores_every_row_in_order(tmp_path: Path, shared_data: Path) -> None:
    rows = gsm8k_rows(shared_data, 300)
    rows.insert(7, {"id": "no-response", "reference": "1"})
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    with open(inp, "a") as f:
        f.write("{torn json\n\n")
    out = tmp_path / "out.jsonl"
    done = run_score(inp, out, "--verifier", "exact_match", "--chunk-size", "32")
    assert done.returncode == 0, done.stderr
    got = read_jsonl(out)
    assert [r["id"] for r in got] == [r["id"] for r in rows] + [301]  # the bad line gets its position as id
    for src, row in zip(rows, got):
        assert {k: row[k] for k in src} == src  # input fields kept as they were
    by_id = {r["id"]: r for r in got}
    assert by_id["no-response"]["status"] == "error" and by_id["no-response"]["score"] is None
    assert "not valid JSON" in by_id[301]["reason"]
    scored = [r for r in got if r["status"] == "ok"]
    assert len(scored) == 300
    assert sum(r["score"] for r in scored) == sum(1 for r in rows[:7] + rows[8:] if r["response"] == r["reference"])
    assert "mean score" in done.stdout and "error" in done.stdout


def test_through_the_server_with_parquet_and_a_verifier_field(tmp_path: Path, server: LiveServer) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [{"id": i, "answer": f"ans{i}", "gold": f"ANS{i}" if i % 4 else "other",
             "checker": "exact_match" if i % 10 else ("test_down" if i % 20 else "nope")} for i in range(120)]
    inp = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), inp)
    out = tmp_path / "out.parquet"
    done = run_score(inp, out, "--url", server.url, "--verifier-field", "checker", "--response-field", "answer",
                     "--reference-field", "gold", "--chunk-size", "16", "--concurrency", "3")
    assert done.returncode == 0, done.stderr
    table = pq.read_table(out)
    assert table.schema.field("id").type == pa.int64()  # the input's own column types are kept
    got = table.to_pylist()
    assert [r["id"] for r in got] == list(range(120))
    statuses = Counter(r["status"] for r in got)
    # Rows naming an unknown verifier are errors of their own; the rest of their chunk is scored.
    assert statuses == {"ok": 108, "unavailable": 6, "error": 6}
    for r in got:
        if r["status"] == "ok":
            assert r["score"] == (1.0 if r["id"] % 4 else 0.0)
            assert isinstance(json.loads(r["details"]), dict)
        elif r["status"] == "error":
            assert "nope" in r["reason"] and r["score"] is None
    assert not (tmp_path / "out.parquet.journal.jsonl").exists()


def test_unknown_verifier_fails_fast(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "response": "a"}])
    done = run_score(inp, tmp_path / "out.jsonl", "--verifier", "no_such_thing")
    assert done.returncode != 0 and "no_such_thing" in done.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "response": "a"}, {"id": 1, "response": "b"}])
    done = run_score(inp, tmp_path / "out.jsonl", "--verifier", "exact_match")
    assert done.returncode != 0 and "appears twice" in done.stderr


def sigkill_when(proc: subprocess.Popen[str], out: Path, min_lines: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = out.read_bytes().count(b"\n") if out.exists() else 0
        if lines >= min_lines:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return lines
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.02)
    raise AssertionError("the run never reached the kill point")


@pytest.mark.parametrize("out_name", ["out.jsonl", "out.parquet"])
def test_sigkill_mid_run_then_resume_gives_every_row_exactly_once(tmp_path: Path, out_name: str) -> None:
    rows = [{"id": f"r{i}", "response": "x", "reference": None} for i in range(360)]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / out_name
    journal = out if out_name.endswith(".jsonl") else tmp_path / (out_name + ".journal.jsonl")
    args = ["--verifier", "test_sleep", "--options", '{"seconds": 0.02}', "--chunk-size", "12"]
    kills = []
    for stop_at in (40, 150):  # killed twice, at different points
        proc = subprocess.Popen(score_cmd(inp, out, *args), env=cli_env(), cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            kills.append(sigkill_when(proc, journal, stop_at))
        finally:
            with_group_killed(proc)
    assert kills[0] < 360 and kills[1] < 360
    # A write torn by the kill leaves half a line; simulate the worst case on top of the real kills.
    with open(journal, "ab") as f:
        f.write(b'{"id": "r359", "response": "x", "sco')
    done = run_score(inp, out, *args)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr
    if out_name.endswith(".parquet"):
        import pyarrow.parquet as pq

        got = pq.read_table(out).to_pylist()
    else:
        got = read_jsonl(out)
    assert [r["id"] for r in got] == [r["id"] for r in rows]  # each row exactly once, in input order
    assert all(r["status"] == "ok" and r["score"] == 1.0 for r in got)
    assert "360" in done.stdout  # the summary counts rows of every run


def test_score_batch_is_a_pure_row_function_for_ray(server: LiveServer) -> None:
    """The Ray Data path: a sync verify function over a batch of rows (here the sync client)."""
    from reward_client import RewardClient

    spec = RowSpec(verifier="exact_match", response_field="text", reference_field="gold")
    rows = [{"id": i, "text": t, "gold": "yes"} for i, t in enumerate(["yes", "no", "YES"])] + [{"id": 3}]
    with RewardClient(server.url) as client:
        def verify(items: list[dict]) -> list[dict]:
            return [{"score": r.score, "status": r.status, "reason": r.reason, "details": r.details}
                    for r in client.verify(items)]

        out = score_batch(rows, spec, verify)
    assert [r["score"] for r in out] == [1.0, 0.0, 1.0, None]
    assert out[3]["status"] == "error" and out[0]["text"] == "yes"
