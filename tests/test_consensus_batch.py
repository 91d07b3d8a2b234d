"""Groups through ``reward-service score`` (``--group-field``): chunks never cut a group, so consensus sees it whole."""
from __future__ import annotations

from pathlib import Path

from reward_service.batch.rows import group_chunks
from tests.test_batch_score import read_jsonl, run_score, write_jsonl


def test_group_chunks_keep_runs_of_one_group_together() -> None:
    rows = [{"g": g} for g in "aaaabbbc"] + [{"x": 1}, {"x": 2}]
    chunks = list(group_chunks(rows, 3, "g"))
    assert [[r.get("g") for r in c] for c in chunks] == [list("aaaa"), list("bbb"), ["c", None, None]]
    assert [len(c) for c in group_chunks(rows, 3, None)] == [3, 3, 3, 1]


def test_score_command_scores_groups_whole(tmp_path: Path) -> None:
    score_groups_whole(tmp_path)


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
