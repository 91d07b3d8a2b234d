"""Find the SQL query in a model completion.

In order: the last fenced block tagged as SQL (```sql, ```sqlite, ```postgresql...); the last ``<answer>`` /
``<sql>`` / ``<solution>`` tag; the statement after the last "the query is:" / "SQL:" / "answer:" marker; the last
untagged fence that holds a query; the whole text when it starts with a statement (a plain string); else the last
statement in the text that starts a line with SELECT or WITH. Outside a fence a statement ends at its ``;``, an
empty line or the end of the text; a statement chained after the ``;`` is kept, so the runner refuses the pair
instead of the extractor quietly dropping the second one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from verifiers.kinds.code.extract import fenced_blocks
from verifiers.kinds.sql.lexer import STATEMENT_KEYWORDS, take_statement, tokens

MARKERS_TRIED = 20  # the last markers only: a flood of markers must not make the reading quadratic
QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES"})
_TAGS = re.compile(r"<(answer|sql|solution)>(.*?)(?:</\1>|\Z)", re.S | re.I)
_MARKER = re.compile(r"\b(?:query|sql|answer)(?:[ \t]++is)?+[ \t]*+:", re.I)
_INLINE = re.compile(r"[ \t]*+(?:`(?!`))([^`\n]++)`")
_SPACE = re.compile(r"\s*+")
_LINE_START = re.compile(r"^[ \t>*-]*+(?:SELECT|WITH)\b", re.M | re.I)


@dataclass(frozen=True)
class ExtractedQuery:
    sql: str
    source: str  # fenced:sql, tag:answer, marker, fenced, whole_text, last_statement


def starts_query(text: str, pos: int = 0, starts: frozenset[str] = QUERY_STARTS) -> bool:
    first = next(tokens(text, pos), None)
    return first is not None and first.kind == "word" and first.upper in starts


def _after_marker(text: str) -> str | None:
    """The statement after the last marker that a query follows (`inline code` or the statement up to its end)."""
    for marker in reversed(list(_MARKER.finditer(text))[-MARKERS_TRIED:]):
        inline = _INLINE.match(text, marker.end())
        if inline and starts_query(inline.group(1)):
            return inline.group(1).strip()
        space = _SPACE.match(text, marker.end())
        pos = space.end() if space else marker.end()
        if starts_query(text, pos):
            return take_statement(text, pos) or None
    return None


def _last_statement(text: str) -> str | None:
    """The last statement starting a line; a line inside an earlier statement (a subquery) is not a start."""
    found = None
    pos = 0
    while (match := _LINE_START.search(text, pos)) is not None:
        start = match.end() - len(match.group().lstrip(" \t>*-"))
        statement = take_statement(text, start)
        if statement:
            found = statement
        pos = max(start + len(statement), match.end())
    return found


def extract_query(text: str) -> ExtractedQuery | None:
    """None when the completion holds no query."""
    blocks = fenced_blocks(text)
    tagged = [body for tag, body in blocks if "sql" in tag]
    if tagged and tagged[-1].strip():
        return ExtractedQuery(tagged[-1].strip(), "fenced:sql")
    tags = _TAGS.findall(text)
    if tags:
        name, body = tags[-1]
        inner = extract_query(body) if "```" in body else None
        body = inner.sql if inner else body.strip()
        if body:
            return ExtractedQuery(body, f"tag:{name.lower()}")
    marked = _after_marker(text)
    if marked:
        return ExtractedQuery(marked, "marker")
    untagged = [body for tag, body in blocks if not tag and starts_query(body)]
    if untagged:
        return ExtractedQuery(untagged[-1].strip(), "fenced")
    if starts_query(text, starts=STATEMENT_KEYWORDS):  # any statement: the runner refuses what is no query
        whole = take_statement(text, 0)
        return ExtractedQuery(whole, "whole_text") if whole else None
    last = _last_statement(text)
    return ExtractedQuery(last, "last_statement") if last else None
