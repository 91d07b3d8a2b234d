"""Groups through ``reward-service score`` (``--group-field``): chunks never cut a group, so consensus sees it whole."""
from __future__ import annotations

from pathlib import Path

from reward_service.batch.rows import group_chunks
from tests.support.batch import score_groups_whole


def test_group_chunks_keep_runs_of_one_group_together() -> None:
    rows = [{"g": g} for g in "aaaabbbc"] + [{"x": 1}, {"x": 2}]
    chunks = list(group_chunks(rows, 3, "g"))
    assert [[r.get("g") for r in c] for c in chunks] == [list("aaaa"), list("bbb"), ["c", None, None]]
    assert [len(c) for c in group_chunks(rows, 3, None)] == [3, 3, 3, 1]


def test_score_command_scores_groups_whole(tmp_path: Path) -> None:
    score_groups_whole(tmp_path)


