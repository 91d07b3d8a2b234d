"""Contained execution of one read-only query against a SQLite file.

Layers, each enough on its own for what it guards:

- the statement: exactly one, starting with SELECT, WITH or VALUES (so VACUUM, PRAGMA, ATTACH never reach SQLite);
- the file: opened through a ``mode=ro&immutable=1`` URI, so SQLite neither writes it nor takes locks or reads a
  journal, and ``query_only`` refuses writes on the connection;
- the authorizer: everything is denied except reading, selecting, recursive CTEs and a list of pure built-in
  functions (no ``load_extension``, no ATTACH, so no ``VACUUM INTO``, no pragma, no write, no transaction);
- the limits: ``SQLITE_LIMIT_LENGTH`` caps every string or blob a query builds (``zeroblob``, ``printf``, ``||`` in
  a recursive CTE), ``SQLITE_LIMIT_ATTACHED`` is 0, temporary b-trees stay in memory under SQLite's heap limit;
- the budget: a progress handler interrupts the query once its time is spent, rows are fetched in batches up to a
  row cap and a byte cap, so a cartesian product or a never-ending recursive CTE ends within its budget.

All of it runs in the engine's killable worker process, which stays the last resort.
"""
from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifiers.kinds.sql.lexer import statements

# Pure built-in functions (core, aggregate, window, date/time, math, JSON), lower case: every other function name,
# load_extension and any application-defined one included, is refused by the authorizer.
SAFE_FUNCTIONS = frozenset(
    """
    abs char coalesce concat concat_ws format glob hex ifnull iif instr length like likelihood likely lower ltrim max
    min nullif octet_length printf quote random randomblob replace round rtrim sign soundex substr substring trim
    typeof unhex unicode unlikely upper zeroblob
    avg count group_concat string_agg sum total
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
    date time datetime julianday unixepoch strftime timediff current_date current_time current_timestamp
    acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 log2 mod pi pow power
    radians sin sinh sqrt tan tanh trunc
    json json_array json_array_length json_extract json_insert json_object json_patch json_quote json_remove
    json_replace json_set json_type json_valid json_group_array json_group_object -> ->>
    """.split()
)
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES"})
CLOCK_EVERY_ROWS = 256  # rows fetched between two looks at the clock
PROGRESS_EVERY = 1000  # virtual machine instructions between two looks at the clock
_LIMITS = {
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 100_000,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 200,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 100,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 1000,
}


@dataclass(frozen=True)
class QueryLimits:
    timeout_s: float = 2.0
    max_rows: int = 100_000
    max_value_bytes: int = 1_000_000  # longest string or blob a query may build
    max_result_bytes: int = 64 * 1024 * 1024  # text and blobs fetched, all rows together
    # SQLite's hard heap limit: process-wide, and SQLite only ever lowers it, so the smallest value any query in the
    # process asked for holds (the verifier always asks for the same one).
    heap_mb: int = 512


@dataclass
class QueryResult:
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    complete: bool = True  # False: stopped at the row limit the caller gave, more rows were there
    elapsed_ms: float = 0.0


class QueryFailed(Exception):
    """The query did not produce a result; ``kind`` names why (refused, syntax, timeout, too_large, memory, error)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


def check_statement(sql: str) -> None:
    """Refuse anything but one query before SQLite sees it."""
    found = statements(sql)
    if not found:
        raise QueryFailed("refused", "no statement")
    if len(found) > 1:
        raise QueryFailed("refused", f"{len(found)} statements; one query only")
    first = found[0][0]
    if first.kind != "word" or first.upper not in QUERY_STARTS:
        raise QueryFailed("refused", f"only queries run (SELECT, WITH, VALUES), not {first.text[:30]!r}")


def _authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in SAFE_FUNCTIONS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def database_uri(path: Path) -> str:
    return f"{path.resolve().as_uri()}?mode=ro&immutable=1"


_CONVERSION = re.compile(r"%[-+ 0#,!]*+(\*|[0-9]++)?+(?:\.(\*|[0-9]++))?+([a-zA-Z%])")


class _GuardedPrintf:
    """``printf``/``format`` that refuse a width or precision beyond the length limit, then let SQLite format.

    SQLite 3.40 repeats a ``%c`` precision character by character without stopping when the text outgrows its
    limit: ``printf('%!.2000000000c', 'x')`` computes for half a minute inside one function call, where the progress
    handler cannot interrupt it. The numbers are read here first; the formatting itself stays SQLite's own, on a
    private in-memory connection with the same length limit.
    """

    def __init__(self, max_value_bytes: int):
        self.max_value_bytes = max_value_bytes
        self.refused = ""
        self._sqlite: sqlite3.Connection | None = None  # opened on the first call: most queries never format

    def __call__(self, *args: Any) -> Any:
        if args and isinstance(args[0], str):
            rest = iter(args[1:])
            for width, precision, conversion in _CONVERSION.findall(args[0]):
                sizes = [next(rest, 0) if n == "*" else n for n in (width, precision)]
                if conversion != "%":
                    next(rest, None)
                if any(abs(_as_int(n)) > self.max_value_bytes for n in sizes):
                    self.refused = f"printf width or precision beyond {self.max_value_bytes}"
                    raise ValueError(self.refused)
        if self._sqlite is None:
            self._sqlite = sqlite3.connect(":memory:", check_same_thread=False)
            self._sqlite.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.max_value_bytes)
        placeholders = ", ".join("?" * len(args))
        return self._sqlite.execute(f"SELECT printf({placeholders})", args).fetchone()[0]

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()


def _as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def open_readonly(path: Path, limits: QueryLimits) -> tuple[sqlite3.Connection, _GuardedPrintf]:
    conn = sqlite3.connect(database_uri(path), uri=True, isolation_level=None, check_same_thread=False)
    printf = _GuardedPrintf(limits.max_value_bytes)
    try:
        # Set before the authorizer, which refuses every pragma afterwards.
        conn.execute(f"PRAGMA hard_heap_limit={int(limits.heap_mb) * 1024 * 1024}")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA query_only=1")
        conn.execute("PRAGMA trusted_schema=0")
        for limit, value in _LIMITS.items():
            conn.setlimit(limit, value)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
        for name in ("printf", "format"):
            conn.create_function(name, -1, printf, deterministic=True)
        conn.set_authorizer(_authorize)
    except BaseException:
        conn.close()
        printf.close()
        raise
    return conn, printf


def _error_kind(exc: sqlite3.Error) -> str:
    message = str(exc)
    if "not authorized" in message or isinstance(exc, sqlite3.ProgrammingError):
        return "refused"
    if "syntax error" in message or "incomplete input" in message or "unrecognized token" in message:
        return "syntax"
    if "too big" in message:
        return "too_large"
    return "error"


def _size(row: Sequence[Any]) -> int:
    return sum(len(v) for v in row if isinstance(v, (str, bytes)))


def run_query(path: Path, sql: str, limits: QueryLimits, row_limit: int | None = None) -> QueryResult:
    """Rows of ``sql`` (at most ``row_limit`` when given, ``complete=False`` if more were there); raises
    ``QueryFailed`` when it is refused, fails, overruns its budget or its caps."""
    check_statement(sql)
    most = min(row_limit, limits.max_rows) if row_limit is not None else limits.max_rows
    started = time.monotonic()
    deadline = started + limits.timeout_s
    conn, printf = open_readonly(path, limits)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_EVERY)
    try:
        try:
            cursor = conn.execute(sql)
            rows: list[tuple[Any, ...]] = []
            fetched_bytes = 0
            for row in cursor:  # row by row: a batch of wide rows could itself outgrow the byte cap
                rows.append(row)
                fetched_bytes += _size(row)
                if fetched_bytes > limits.max_result_bytes:
                    raise QueryFailed("too_large", f"result exceeds {limits.max_result_bytes} bytes")
                if len(rows) > most:
                    if row_limit is not None and most == row_limit:
                        return QueryResult(_columns(cursor), rows[:most], False, _ms(started))
                    raise QueryFailed("too_many_rows", f"more than {limits.max_rows} rows")
                if len(rows) % CLOCK_EVERY_ROWS == 0 and time.monotonic() > deadline:
                    break
            if time.monotonic() > deadline:
                raise QueryFailed("timeout", f"query exceeded its {limits.timeout_s:g}s budget")
            return QueryResult(_columns(cursor), rows, True, _ms(started))
        except sqlite3.OperationalError as exc:
            if printf.refused:
                raise QueryFailed("too_large", printf.refused) from None
            if time.monotonic() > deadline or str(exc) == "interrupted":
                raise QueryFailed("timeout", f"query exceeded its {limits.timeout_s:g}s budget") from None
            raise QueryFailed(_error_kind(exc), str(exc)) from None
        except MemoryError:
            raise QueryFailed("memory", f"query exceeded SQLite's {limits.heap_mb} MiB heap limit") from None
        except sqlite3.Error as exc:
            raise QueryFailed(_error_kind(exc), str(exc)) from None
    finally:
        conn.close()
        printf.close()


def _columns(cursor: sqlite3.Cursor) -> tuple[str, ...]:
    return tuple(d[0] for d in cursor.description or ())


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)
