"""The ``sql`` verifier: execution accuracy of a text-to-SQL answer against a gold query on the same database.

The reference is ``{"sql": GOLD, "database": NAME}`` (Spider's ``query`` / BIRD's ``SQL`` and ``db_id`` keys are
read too). Both queries run contained (``execute``), the gold one first and cached per process; the answer's
result is compared with the gold's under the rule the options name (``compare``). A gold query that fails is the
reference's fault (``invalid_reference``); an answer that is refused, fails, or overruns its budget scores 0 with
the reason (``rejected`` for a statement the containment refuses, ``ok`` with score 0 for one SQLite ran and that
failed or overran).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.sql.compare import CompareMode, Rule, compare
from verifiers.kinds.sql.databases import databases_dir, resolve_database
from verifiers.kinds.sql.execute import QueryFailed, QueryLimits, QueryResult, run_query
from verifiers.kinds.sql.extract import extract_query
from verifiers.kinds.sql.lexer import orders_rows, statements, without_word
from verifiers.types import InvalidReference, Verdict

SQL_KEYS = ("sql", "query", "SQL")
DATABASE_KEYS = ("database", "db_id")
SHOWN_SQL_CHARS = 2000
GOLD_CACHE_ENTRIES = 512
GOLD_CACHE_ROWS = 10_000  # a gold result with more rows is run again each time rather than held
BUDGET_SHARE = 0.4  # of an item deadline, per query: gold and answer both fit, with room to spare


class SqlOptions(BaseOptions):
    compare: CompareMode = Field(
        "spider", description="spider: rows as a bag, ordered only when the gold query has ORDER BY, columns may be "
        "permuted; set: BIRD's set of rows; ordered: the same rows in the same order.")
    permute_columns: bool | None = Field(
        None, description="Accept the answer's columns in another order (default: true for spider, false otherwise).")
    keep_distinct: bool | None = Field(
        None, description="Run DISTINCT as written (default: false for spider, whose evaluation removes every DISTINCT "
        "from both queries; true otherwise).")
    float_tolerance: float | None = Field(
        None, ge=0, le=1, description="Relative and absolute tolerance for numbers (default: exact, as Spider/BIRD).")
    query_timeout_s: float = Field(
        2.0, gt=0, le=60, description="Time budget of each query (gold and answer); at most 0.4 x timeout_s.")
    max_rows: int = Field(100_000, ge=1, le=1_000_000, description="Most rows a query may return.")
    engine: Literal["sqlite"] = Field("sqlite", description="The database engine (SQLite files).")

    @model_validator(mode="after")
    def _budget_fits(self) -> SqlOptions:
        if self.timeout_s is not None and self.query_timeout_s > BUDGET_SHARE * self.timeout_s:
            self.query_timeout_s = BUDGET_SHARE * self.timeout_s
        return self


@dataclass(frozen=True)
class SqlReference:
    sql: str
    database: str


def parse_reference(reference: Any) -> SqlReference:
    if not isinstance(reference, dict):
        raise InvalidReference('the reference must be {"sql": GOLD_QUERY, "database": NAME}')
    # The first key holding text: a Spider row's "sql" is its parsed form (a mapping), its "query" the text.
    sql = next((reference[k] for k in SQL_KEYS if isinstance(reference.get(k), str)), None)
    database = next((reference[k] for k in DATABASE_KEYS if k in reference), None)
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidReference("the reference has no gold query ('sql')")
    if database is None:
        raise InvalidReference("the reference names no database ('database')")
    return SqlReference(sql, database)


class GoldCache:
    """Gold results per (database file and its version, query, limits), least recently used out first."""

    def __init__(self, entries: int = GOLD_CACHE_ENTRIES):
        self.entries = entries
        self._held: OrderedDict[tuple[Any, ...], QueryResult | QueryFailed] = OrderedDict()

    def run(self, path: Path, sql: str, limits: QueryLimits) -> QueryResult:
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size, sql, limits)
        held = self._held.get(key)
        if held is None:
            try:
                held = run_query(path, sql, limits)
            except QueryFailed as failed:
                if failed.kind == "timeout":  # may pass on a calmer machine: never held
                    raise
                held = failed
            if isinstance(held, QueryFailed) or len(held.rows) <= GOLD_CACHE_ROWS:
                self._held[key] = held
                while len(self._held) > self.entries:
                    self._held.popitem(last=False)
        else:
            self._held.move_to_end(key)
        if isinstance(held, QueryFailed):
            raise held
        return held


@lru_cache(maxsize=GOLD_CACHE_ENTRIES)
def gold_orders_rows(sql: str) -> bool:
    return orders_rows(statements(sql)[0])


def _shown(sql: str) -> str:
    return sql if len(sql) <= SHOWN_SQL_CHARS else sql[:SHOWN_SQL_CHARS] + "..."


class SqlVerifier(Verifier[SqlOptions]):
    name = "sql"
    description = ("Text-to-SQL execution match: the answer's query and the gold query run read-only on a SQLite "
                   "database; results compared by Spider's test-suite rules, BIRD's set rule or exact order.")
    Options = SqlOptions
    default_timeout_s = 10.0

    def __init__(self) -> None:
        self.gold_cache = GoldCache()

    def check(self, response: str, reference: Any, options: SqlOptions) -> Verdict:
        ref = parse_reference(reference)
        keep_distinct = options.keep_distinct if options.keep_distinct is not None else options.compare != "spider"
        if not keep_distinct:
            ref = SqlReference(without_word(ref.sql, "DISTINCT"), ref.database)
        path = resolve_database(databases_dir(), ref.database)
        limits = QueryLimits(timeout_s=options.query_timeout_s, max_rows=options.max_rows)
        try:
            gold = self.gold_cache.run(path, ref.sql, limits)
        except QueryFailed as failed:
            if failed.kind == "timeout":
                return Verdict.timeout(f"the gold query exceeded its {limits.timeout_s:g}s budget")
            raise InvalidReference(f"the gold query failed: {failed}") from None
        extracted = extract_query(response)
        if extracted is None:
            return Verdict.no_answer("no SQL query found in the response")
        shown: dict[str, Any] = {"sql": _shown(extracted.sql), "extracted_from": extracted.source}
        rule = Rule(
            mode=options.compare,
            order_matters=options.compare == "ordered" or (options.compare == "spider" and gold_orders_rows(ref.sql)),
            permute_columns=options.permute_columns if options.permute_columns is not None
            else options.compare == "spider",
            float_tolerance=options.float_tolerance,
        )
        row_limit = None if rule.mode == "set" else len(gold.rows) + 1  # one more row already decides
        try:
            answer_sql = extracted.sql if keep_distinct else without_word(extracted.sql, "DISTINCT")
            answer = run_query(path, answer_sql, limits, row_limit)
        except QueryFailed as failed:
            failure = {**shown, "error": failed.kind, "message": failed.message[:500]}
            if failed.kind == "refused":
                return Verdict.rejected(f"query refused: {failed.message}", **failure)
            return Verdict.ok(0.0, f"query failed ({failed.kind}): {failed.message}", **failure)
        details = {**shown, "compare": rule.mode, "order_matters": rule.order_matters, "keep_distinct": keep_distinct,
                   "rows": len(answer.rows), "gold_rows": len(gold.rows), "query_ms": answer.elapsed_ms}
        if not answer.complete:
            return Verdict.ok(0.0, f"returned more rows than the gold query's {len(gold.rows)}", **details)
        result = compare(gold.rows, answer.rows, rule)
        if result.permutations_capped:
            details["permutations_capped"] = True
        if result.column_order is not None and result.column_order != tuple(range(len(result.column_order))):
            details["column_order"] = list(result.column_order)
        return Verdict.ok(1.0 if result.equal else 0.0, result.reason, **details)


VERIFIERS: list[Verifier[Any]] = [SqlVerifier()]
