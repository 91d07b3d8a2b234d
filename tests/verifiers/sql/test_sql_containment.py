"""Hostile queries against the sql verifier, run in the engine's worker process: each scores 0 with a reason, the
database file stays byte-identical, no file appears elsewhere, and runaway queries end within their own budget
(before the item's deadline). The authorizer is also tested alone, without the statement check in front of it."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ROOT
from tests.support.sql import build_databases, digest
from verifiers.engine.local import LocalVerifier
from verifiers.kinds.sql.execute import QueryLimits, open_readonly
from verifiers.types import Status, VerifyItem

GOLD = {"sql": "SELECT name FROM singer WHERE age > 30", "database": "concert_singer"}


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_databases(tmp_path_factory.mktemp("sqldb"))


@pytest.fixture(scope="module")
def local(databases: Path) -> Iterator[LocalVerifier]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REWARD_SERVICE_SQL_DATABASES_DIR", str(databases))
        with LocalVerifier(["verifiers.kinds.sql"]) as verifier:
            yield verifier


def hostile_queries(drop: Path) -> list[str]:
    """``drop``: a path no query may create."""
    return [
        f"ATTACH DATABASE '{drop}' AS evil",
        f"```sql\nATTACH '{drop}' AS evil;\nSELECT name FROM singer WHERE age > 30\n```",
        f"VACUUM INTO '{drop}'",
        f"The query is: VACUUM INTO '{drop}'",
        "INSERT INTO singer VALUES (8, 'x', 'y', 1, 1.0, 'T')",
        "UPDATE singer SET age = 99",
        "DELETE FROM singer",
        "DROP TABLE singer",
        "CREATE TABLE t (x)",
        "CREATE TEMP TABLE t AS SELECT * FROM singer",
        "ALTER TABLE singer RENAME TO s",
        "REPLACE INTO singer VALUES (1, 'x', 'y', 1, 1.0, 'T')",
        "ANALYZE",
        "REINDEX",
        "BEGIN IMMEDIATE",
        "SAVEPOINT s",
        "PRAGMA writable_schema = ON",
        "PRAGMA journal_mode = WAL",
        "PRAGMA query_only = 0",
        "SELECT name FROM pragma_table_info('singer')",
        "SELECT load_extension('/tmp/libevil.so')",
        "SELECT load_extension('/tmp/libevil.so', 'sqlite3_evil_init')",
        f"SELECT writefile('{drop}', 'x')",
        "SELECT readfile('/etc/passwd')",
        "SELECT fts3_tokenizer('simple')",
        "SELECT name FROM singer WHERE age > 30; DROP TABLE singer",
        "SELECT name FROM singer WHERE age > 30;\nDELETE FROM singer;",
        "```sql\nSELECT name FROM singer WHERE age > 30;\nUPDATE singer SET age = 0;\n```",
        "/* SELECT */ DELETE FROM singer",
        "-- SELECT name FROM singer\nDROP TABLE singer",
        "SELECT name FROM singer WHERE age > 30 /* ; */; DROP TABLE singer",
        "SELECT name FROM singer WHERE age > 30 --\n; DELETE FROM singer",
        "WITH x AS (SELECT 1) DELETE FROM singer",
        "WITH x AS (SELECT 1) INSERT INTO singer SELECT * FROM singer",
        "WITH x AS (SELECT 1) UPDATE singer SET age = 0",
        "EXPLAIN SELECT 1",
    ]


RUNAWAYS = [
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x FROM c) SELECT max(x) FROM c",
    "SELECT count(*) FROM item a, item b, item c",
    "SELECT a.label, b.label FROM item a, item b ORDER BY random()",
    "SELECT count(*) FROM item a, item b WHERE a.label LIKE '%' || b.label || '%'",
]

HUGE = [
    "SELECT zeroblob(1000000000)",
    "SELECT randomblob(2000000000)",
    "SELECT length(randomblob(900000) || randomblob(900000))",
    "SELECT printf('%.*c', 2000000000, 'x')",
    "SELECT printf('%!.2000000000c', 'x')",
    "SELECT format('%2000000000d', 1) IS NULL",
    "WITH RECURSIVE r(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM r) SELECT length(s) FROM r",
    "SELECT group_concat(printf('%.*c', 1000, 'x')) FROM item",
    "SELECT replace(hex(zeroblob(400000)), '0', 'xxxxxxxx')",
    "SELECT randomblob(900000) FROM item",
]


def run(local: LocalVerifier, response: str, **options: object) -> dict[str, object]:
    verdict = local.verify(VerifyItem("sql", response, GOLD, {"query_timeout_s": 1.0, "timeout_s": 10, **options}))
    return verdict.to_dict()


def test_hostile_queries_score_zero_and_touch_nothing(local: LocalVerifier, databases: Path, tmp_path: Path) -> None:
    db = databases / "concert_singer" / "concert_singer.sqlite"
    before = digest(db)
    drop = tmp_path / "dropped.sqlite"
    for query in hostile_queries(drop):
        verdict = run(local, query)
        assert verdict["score"] == 0.0 and verdict["status"] in {"rejected", "ok", "no_answer"}, (query, verdict)
        assert verdict["reason"], query
        assert not drop.exists(), query
    assert digest(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["concert_singer.sqlite"]  # no journal, no WAL
    assert run(local, "SELECT name FROM singer WHERE age > 30")["score"] == 1.0  # still whole, still served


def test_refusals_say_why(local: LocalVerifier, tmp_path: Path) -> None:
    attach = run(local, f"ATTACH '{tmp_path / 'x.db'}' AS x")
    assert attach["status"] == "rejected" and "only queries run" in str(attach["reason"])
    chained = run(local, "SELECT name FROM singer WHERE age > 30; DROP TABLE singer")
    assert chained["status"] == "rejected" and "2 statements" in str(chained["reason"])
    extension = run(local, "SELECT load_extension('/tmp/libevil.so')")
    assert extension["status"] == "rejected" and "load_extension" in str(extension["reason"])


def test_runaway_queries_end_within_their_budget(local: LocalVerifier, databases: Path) -> None:
    db = databases / "concert_singer" / "concert_singer.sqlite"
    before = digest(db)
    for query in RUNAWAYS:
        verdict = run(local, query)
        # A zero with the query's own reason, not the item's deadline (status "timeout", null score) killing it.
        assert verdict["status"] == "ok" and verdict["score"] == 0.0, (query, verdict)
        assert verdict["details"]["error"] == "timeout", (query, verdict)  # type: ignore[index]
        assert "1s budget" in str(verdict["reason"])
        assert float(verdict["elapsed_ms"]) < 10_000  # type: ignore[arg-type]
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x FROM c) SELECT x FROM c"
    # Rows streaming without end: one row past the gold's decides; under the set rule the row cap does.
    assert "more rows than the gold" in str(run(local, endless)["reason"])
    as_set = run(local, endless, compare="set")
    assert as_set["score"] == 0.0 and as_set["details"]["error"] in {"too_many_rows", "timeout"}  # type: ignore[index]
    assert digest(db) == before


def test_huge_values_are_capped(local: LocalVerifier, databases: Path) -> None:
    db = databases / "concert_singer" / "concert_singer.sqlite"
    before = digest(db)
    for query in HUGE:
        verdict = run(local, query)
        assert verdict["status"] == "ok" and verdict["score"] == 0.0, (query, verdict)
        assert float(verdict["elapsed_ms"]) < 10_000, query  # type: ignore[arg-type]
    huge = run(local, "SELECT zeroblob(1000000000)")
    assert huge["details"]["error"] == "too_large"  # type: ignore[index]
    printf = run(local, "SELECT printf('%!.2000000000c', 'x')")
    assert "printf width or precision" in str(printf["reason"])
    assert digest(db) == before


def test_row_cap_on_the_answer_and_the_gold(local: LocalVerifier) -> None:
    many = local.verify(VerifyItem("sql", "SELECT * FROM item", GOLD, {"compare": "set", "max_rows": 100}))
    assert many.score == 0.0 and many.details["error"] == "too_many_rows"
    gold = {"sql": "SELECT * FROM item", "database": "concert_singer"}
    capped = local.verify(VerifyItem("sql", "SELECT 1", gold, {"max_rows": 100}))
    assert capped.status == Status.INVALID_REFERENCE and "more than 100 rows" in capped.reason


def test_a_gold_query_that_overruns_is_a_timeout_not_a_zero(local: LocalVerifier) -> None:
    gold = {"sql": RUNAWAYS[0], "database": "concert_singer"}
    verdict = local.verify(VerifyItem("sql", "SELECT 1", gold, {"query_timeout_s": 0.5}))
    assert verdict.status == Status.TIMEOUT and verdict.score is None and "gold query" in verdict.reason


def test_the_authorizer_alone_refuses_what_the_statement_check_would(databases: Path, tmp_path: Path) -> None:
    db = databases / "concert_singer" / "concert_singer.sqlite"
    before = digest(db)
    drop = tmp_path / "dropped.sqlite"
    conn, printf = open_readonly(db, QueryLimits())
    try:
        for statement in [f"ATTACH '{drop}' AS evil", f"VACUUM INTO '{drop}'", "PRAGMA writable_schema = ON",
                          "PRAGMA query_only = 0", "INSERT INTO singer (name) VALUES ('x')",
                          "CREATE TEMP TABLE t (x)", "BEGIN", "DELETE FROM singer", "SELECT load_extension('x')",
                          "SELECT * FROM pragma_table_info('singer')", "SELECT sqlite_compileoption_get(0)"]:
            with pytest.raises(sqlite3.DatabaseError):
                conn.execute(statement).fetchall()
        assert conn.execute("SELECT count(*) FROM singer").fetchone() == (7,)
    finally:
        conn.close()
        printf.close()
    assert not drop.exists() and digest(db) == before


def test_sqlite_heap_limit_ends_a_query_that_holds_too_much(databases: Path) -> None:
    """A DISTINCT over a cartesian product grows an in-memory index until SQLite's heap limit refuses it; the next
    query runs as usual. In a process of its own: the limit is process-wide and SQLite only ever lowers it."""
    db = databases / "concert_singer" / "concert_singer.sqlite"
    script = f"""
from pathlib import Path
from verifiers.kinds.sql.execute import QueryFailed, QueryLimits, run_query
db = Path({str(db)!r})
query = "SELECT count(*) FROM (SELECT DISTINCT a.label || b.label FROM item a, item b)"
try:
    run_query(db, query, QueryLimits(timeout_s=30.0, heap_mb=16))
except QueryFailed as failed:
    print(failed.kind, failed.message)
print(run_query(db, "SELECT count(*) FROM singer", QueryLimits(heap_mb=16)).rows)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["memory query exceeded SQLite's 16 MiB heap limit", "[(7,)]"]
