"""The sql verifier's comparison rules on a Spider-like database built here: Spider's test-suite rules (bag, ORDER BY,
permuted columns), BIRD's set rule, exact order, float tolerance; reading the query from free text; references."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sql import build_databases
from verifiers.kinds.sql.compare import Rule, compare
from verifiers.kinds.sql.extract import extract_query
from verifiers.kinds.sql.lexer import orders_rows, statements, without_word
from verifiers.kinds.sql.verifier import SqlVerifier
from verifiers.types import InvalidReference, Status, Verdict, VerifierUnavailable


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_databases(tmp_path_factory.mktemp("sqldb"))


@pytest.fixture
def verifier(databases: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlVerifier]:
    monkeypatch.setenv("REWARD_SERVICE_SQL_DATABASES_DIR", str(databases))
    yield SqlVerifier()


def score(verifier: SqlVerifier, answer: str, gold: str, database: str = "concert_singer",
          **options: object) -> Verdict:
    return verifier.check(answer, {"sql": gold, "database": database}, verifier.parse_options(dict(options)))


def test_equivalent_queries_written_differently_match(verifier: SqlVerifier) -> None:
    gold = "SELECT count(*) FROM singer WHERE country = 'France'"
    for answer in [
        "select COUNT(singer_id) from singer where country='France'",
        "SELECT count(*) FROM singer AS s WHERE s.country IN ('France')",
        "SELECT sum(CASE WHEN country = 'France' THEN 1 ELSE 0 END) FROM singer",
        "WITH f AS (SELECT * FROM singer WHERE country = 'France') SELECT count(*) FROM f",
    ]:
        verdict = score(verifier, answer, gold)
        assert (verdict.status, verdict.score) == (Status.OK, 1.0), (answer, verdict)
    joined = ("SELECT T2.concert_name FROM singer_in_concert AS T1 JOIN concert AS T2 ON T1.concert_id = T2.concert_id "
              "GROUP BY T1.concert_id HAVING count(*) > 1")
    sub = ("SELECT concert_name FROM concert WHERE concert_id IN "
           "(SELECT concert_id FROM singer_in_concert GROUP BY concert_id HAVING count(*) >= 2)")
    assert score(verifier, sub, joined).score == 1.0
    wrong = "SELECT count(*) FROM singer WHERE country = 'United States'"
    verdict = score(verifier, wrong, gold)
    assert (verdict.status, verdict.score, verdict.reason) == (Status.OK, 0.0, "rows differ")


def test_permuted_columns_match_under_spider_only(verifier: SqlVerifier) -> None:
    gold = "SELECT name, country, age FROM singer"
    answer = "SELECT age, name, country FROM singer"
    verdict = score(verifier, answer, gold)
    assert verdict.score == 1.0 and verdict.details["column_order"] == [1, 2, 0]
    assert score(verifier, answer, gold, compare="set").score == 0.0
    assert score(verifier, answer, gold, compare="set", permute_columns=True).score == 1.0
    assert score(verifier, answer, gold, compare="spider", permute_columns=False).score == 0.0
    # Each column holds the gold's values, but paired into other rows: no column order makes the rows the same.
    swapped = "SELECT a.name, b.age FROM singer a JOIN singer b ON b.singer_id = 8 - a.singer_id"
    assert score(verifier, swapped, "SELECT name, age FROM singer").score == 0.0


def test_order_counts_only_when_the_gold_orders(verifier: SqlVerifier) -> None:
    ordered_gold = "SELECT name FROM singer ORDER BY age DESC"
    assert score(verifier, "SELECT name FROM singer ORDER BY age DESC", ordered_gold).score == 1.0
    missing = score(verifier, "SELECT name FROM singer", ordered_gold)
    assert missing.score == 0.0 and "another order" in missing.reason and missing.details["order_matters"]
    assert score(verifier, "SELECT name FROM singer ORDER BY age", ordered_gold).score == 0.0
    unordered_gold = "SELECT name FROM singer"
    assert score(verifier, "SELECT name FROM singer ORDER BY age DESC", unordered_gold).score == 1.0
    # An ORDER BY inside a subquery or a window does not order the result.
    sub_gold = "SELECT name FROM singer WHERE age > (SELECT age FROM singer ORDER BY age LIMIT 1)"
    assert score(verifier, "SELECT name FROM singer WHERE age > 25 ORDER BY name DESC", sub_gold).score == 1.0
    # Under "ordered" the order always counts; under "set" never.
    assert score(verifier, "SELECT name FROM singer ORDER BY name DESC", unordered_gold, compare="ordered").score == 0
    assert score(verifier, "SELECT name FROM singer ORDER BY singer_id", unordered_gold, compare="ordered").score == 1
    assert score(verifier, "SELECT name FROM singer ORDER BY name DESC", ordered_gold, compare="set").score == 1.0


def test_distinct_against_duplicates(verifier: SqlVerifier) -> None:
    gold = "SELECT DISTINCT country FROM singer"
    answer = "SELECT country FROM singer"
    # Spider's evaluation removes every DISTINCT from both queries before running them.
    spider = score(verifier, answer, gold)
    assert spider.score == 1.0 and spider.details["keep_distinct"] is False
    bag = score(verifier, answer, gold, keep_distinct=True)
    assert bag.score == 0.0 and bag.details["rows"] == 4  # stopped one row past the gold's 3
    assert score(verifier, answer, gold, compare="set").score == 1.0  # BIRD: a set of rows
    assert score(verifier, answer, gold, compare="ordered").score == 0.0
    assert score(verifier, "SELECT country FROM singer GROUP BY country", gold, keep_distinct=True).score == 1.0
    dup_gold = "SELECT country FROM singer"
    assert score(verifier, "SELECT DISTINCT country FROM singer", dup_gold, keep_distinct=True).score == 0.0
    assert score(verifier, "SELECT DISTINCT country FROM singer", dup_gold, compare="set").score == 1.0
    # Inside an aggregate too (Spider's rule, kept as it is): count(DISTINCT x) runs as count(x).
    counted = "SELECT count(DISTINCT country) FROM singer"
    assert score(verifier, "SELECT count(country) FROM singer", counted).score == 1.0
    assert score(verifier, "SELECT count(country) FROM singer", counted, keep_distinct=True).score == 0.0
    # A DISTINCT inside a string or a quoted name is not a keyword.
    assert score(verifier, "SELECT 'DISTINCT'", "SELECT 'DISTINCT'").score == 1.0


def test_floats_computed_another_way(verifier: SqlVerifier) -> None:
    gold = "SELECT avg(height) FROM singer WHERE country = 'France'"
    other = "SELECT sum(height) / count(height) * 1.0000000000001 FROM singer WHERE country = 'France'"
    assert score(verifier, other, gold).score == 0.0  # exact, as Spider and BIRD compare
    assert score(verifier, other, gold, float_tolerance=1e-9).score == 1.0
    rounded = "SELECT round(avg(height), 2) FROM singer WHERE country = 'France'"
    assert score(verifier, rounded, gold, float_tolerance=1e-9).score == 0.0
    assert score(verifier, rounded, gold, float_tolerance=1e-2).score == 1.0
    # An integer and the same number as a float are the same value (SQL's 2 = 2.0).
    assert score(verifier, "SELECT 2.0", "SELECT count(*) FROM concert WHERE year = 2015").score == 1.0
    # Tolerance pairs rows by their other values first, so a near-tie in the numbers cannot misalign the rows.
    assert score(verifier, "VALUES ('b', 1.0), ('a', 1.00000001)", "VALUES ('a', 1.0), ('b', 1.00000001)",
                 float_tolerance=1e-6).score == 1.0


def test_empty_results_and_column_counts(verifier: SqlVerifier) -> None:
    empty = "SELECT name FROM singer WHERE age > 100"
    assert score(verifier, "SELECT name, age FROM singer WHERE age < 0", empty).score == 1.0
    assert score(verifier, "SELECT name FROM singer LIMIT 1", empty).score == 0.0
    wide = score(verifier, "SELECT name, age FROM singer", "SELECT name FROM singer")
    assert wide.score == 0.0 and "columns" in wide.reason


def test_answer_errors_score_zero_naming_sqlite(verifier: SqlVerifier) -> None:
    syntax = score(verifier, "SELECT name FORM singer", "SELECT name FROM singer")
    assert (syntax.status, syntax.score) == (Status.OK, 0.0)
    assert syntax.details["error"] == "syntax" and 'near "singer": syntax error' in syntax.reason
    missing = score(verifier, "SELECT nickname FROM singer", "SELECT name FROM singer")
    assert missing.score == 0.0 and "no such column: nickname" in missing.reason
    none = score(verifier, "I do not know.", "SELECT name FROM singer")
    assert none.status == Status.NO_ANSWER


def test_reference_faults_are_named(verifier: SqlVerifier, databases: Path) -> None:
    with pytest.raises(InvalidReference, match="gold query failed.*no such table"):
        score(verifier, "SELECT 1", "SELECT * FROM singers")
    with pytest.raises(InvalidReference, match="one query only"):
        score(verifier, "SELECT 1", "SELECT 1; SELECT 2")
    with pytest.raises(InvalidReference, match="no database"):
        score(verifier, "SELECT 1", "SELECT 1", database="world_1")
    for bad in ["../concert_singer", "/etc/passwd", "..", "concert_singer/../flat_db", "", "a\0b"]:
        with pytest.raises(InvalidReference):
            score(verifier, "SELECT 1", "SELECT 1", database=bad)
    outside = databases.parent / "outside_db"
    outside.mkdir(exist_ok=True)
    (outside / "outside_db.sqlite").write_bytes((databases / "flat_db.sqlite").read_bytes())
    (databases / "escape").mkdir(exist_ok=True)
    link = databases / "linked.sqlite"
    if not link.exists():
        link.symlink_to(outside / "outside_db.sqlite")
    with pytest.raises(InvalidReference, match="outside"):
        score(verifier, "SELECT 1", "SELECT 1", database="linked")
    inside = databases / "alias.sqlite"
    if not inside.exists():
        inside.symlink_to(databases / "flat_db.sqlite")
    assert score(verifier, "SELECT 1", "SELECT 1", database="alias").score == 1.0
    assert score(verifier, "SELECT 1", "SELECT 1", database="flat_db").score == 1.0  # NAME.sqlite layout
    for reference in ["SELECT 1", {"sql": "SELECT 1"}, {"database": "flat_db"}, {"sql": 3, "database": "flat_db"}]:
        with pytest.raises(InvalidReference):
            verifier.check("SELECT 1", reference, verifier.parse_options({}))
    spider_row = {"db_id": "concert_singer", "query": "SELECT count(*) FROM singer", "question": "How many?",
                  "sql": {"select": [False, [[3, [0, [0, "__all__", False], None]]]]}}  # Spider's parsed form
    assert verifier.check("SELECT count(*) FROM singer", spider_row, verifier.parse_options({})).score == 1.0


def test_an_unconfigured_directory_is_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("REWARD_SERVICE_SQL_DATABASES_DIR", raising=False)
    verifier = SqlVerifier()
    with pytest.raises(VerifierUnavailable, match="sql_databases_dir"):
        score(verifier, "SELECT 1", "SELECT 1")
    monkeypatch.setenv("REWARD_SERVICE_SQL_DATABASES_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(VerifierUnavailable, match="does not exist"):
        score(verifier, "SELECT 1", "SELECT 1")


def test_gold_results_are_cached_per_file_version(verifier: SqlVerifier, databases: Path) -> None:
    gold = "SELECT name FROM singer"
    assert score(verifier, gold, gold).score == 1.0
    assert len(verifier.gold_cache._held) == 1
    assert score(verifier, gold, gold).score == 1.0
    assert len(verifier.gold_cache._held) == 1
    with pytest.raises(InvalidReference):
        score(verifier, gold, "SELECT nope FROM singer")
    assert len(verifier.gold_cache._held) == 2  # a failing gold query is held too


def test_extraction_from_free_text() -> None:
    cases = {
        "Reasoning...\n```sql\nSELECT name\nFROM singer;\n```\nThat lists them.": ("SELECT name\nFROM singer;",
                                                                                  "fenced:sql"),
        "```sqlite\nSELECT 1\n```\n```sql\nSELECT 2\n```": ("SELECT 2", "fenced:sql"),
        "SELECT count(*) FROM singer": ("SELECT count(*) FROM singer", "whole_text"),
        "So the query is: SELECT a FROM t WHERE b = 'x;y'; it returns a.": ("SELECT a FROM t WHERE b = 'x;y';",
                                                                             "marker"),
        "The final SQL is: `SELECT a FROM t`.": ("SELECT a FROM t", "marker"),
        "<answer>SELECT 1</answer>": ("SELECT 1", "tag:answer"),
        "<solution>\n```sql\nSELECT 3\n```\n</solution>": ("SELECT 3", "fenced:sql"),
        "I tried\nSELECT a FROM t\n\nbut the right one is\nSELECT b\nFROM t\nWHERE c IN (\n  SELECT c FROM u)\n\n"
        "Done.": ("SELECT b\nFROM t\nWHERE c IN (\n  SELECT c FROM u)", "last_statement"),
        "```\nWITH x AS (SELECT 1) SELECT * FROM x\n```": ("WITH x AS (SELECT 1) SELECT * FROM x", "fenced"),
        "SELECT 1; DROP TABLE singer": ("SELECT 1; DROP TABLE singer", "whole_text"),
        "answer: SELECT 1; this is it": ("SELECT 1;", "marker"),
    }
    for text, (sql, source) in cases.items():
        found = extract_query(text)
        assert found is not None and (found.sql, found.source) == (sql, source), text
    for nothing in ["no query here", "```python\nprint('SELECT')\n```", "", "The answer: 42"]:
        assert extract_query(nothing) is None, nothing


def test_lexer_sees_through_strings_and_comments() -> None:
    assert len(statements("SELECT ';' -- ; \n /* ; */ FROM t;  ")) == 1
    assert len(statements("SELECT 1; SELECT 2")) == 2
    assert orders_rows(statements("SELECT a FROM t ORDER BY a")[0])
    assert orders_rows(statements("select a from t order\n  by a")[0])
    assert not orders_rows(statements("SELECT a FROM t -- ORDER BY a")[0])
    assert not orders_rows(statements("SELECT 'ORDER BY' FROM t")[0])
    assert not orders_rows(statements("SELECT rank() OVER (ORDER BY a) FROM t")[0])
    assert without_word("SELECT DISTINCT a, 'distinct', \"distinct\" FROM t -- distinct", "DISTINCT") == (
        "SELECT  a, 'distinct', \"distinct\" FROM t -- distinct")


def test_compare_column_permutations_are_bounded() -> None:
    width = 9  # every column holds the same values: 9! orders, only the cap's worth tried
    gold = [tuple(range(width))] + [tuple([5] * width)]
    answer = [tuple(reversed(range(width)))] + [tuple([5] * width)]
    rule = Rule("spider", order_matters=False, permute_columns=True)
    assert compare(gold, answer, rule).equal  # the reversal is found among the orders tried
    answer_wrong = [tuple(range(width))] + [tuple([6] * width)]
    assert not compare(gold, answer_wrong, rule).equal


def test_reading_floods_completes() -> None:
    """Hostile completions of about 200k characters: the reading is linear, whatever the markers repeated."""
    floods = ["sql: /*" * 30_000, "SELECT\n" * 30_000, "<answer>" * 25_000, "`" * 200_000, "'" * 200_000,
              "the query is: SELECT 1;" * 9_000, "```sql\n" * 30_000, "(" * 200_000, "SELECT " + "(" * 200_000]
    for flood in floods:
        extract_query(flood)
        statements(flood)
