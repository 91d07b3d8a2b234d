"""Real text-to-SQL sets when /work/shared/data holds them (skipped cleanly otherwise): every gold query of Spider's
dev set and BIRD's dev set runs under the containment (its functions on the allow-list, its results within the caps)
and scores 1 against itself, under its benchmark's rule."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifiers.kinds.sql.verifier import SqlVerifier

LAYOUTS = {
    # name: (rows file, databases directory, gold key, compare)
    "spider": ("spider/dev.json", "spider/database", "query", "spider"),
    "bird": ("bird/dev/dev.json", "bird/dev/dev_databases", "SQL", "set"),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_gold_queries_pass_the_containment_and_match_themselves(
        name: str, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows_file, databases, key, compare = LAYOUTS[name]
    if not (shared_data / rows_file).is_file() or not (shared_data / databases).is_dir():
        pytest.skip(f"{name} not in {shared_data}")
    monkeypatch.setenv("REWARD_SERVICE_SQL_DATABASES_DIR", str(shared_data / databases))
    verifier = SqlVerifier()
    options = verifier.parse_options({"compare": compare, "query_timeout_s": 30})
    rows = json.loads((shared_data / rows_file).read_text())[:200]
    failures = []
    for row in rows:
        verdict = verifier.check(f"```sql\n{row[key]}\n```", row, options)
        if (verdict.status.value, verdict.score) != ("ok", 1.0):
            failures.append((row["db_id"], row[key][:120], verdict.status.value, verdict.reason[:200]))
    assert not failures, failures[:10]
