"""A small SQL tokenizer: enough to find where a statement ends, what it starts with and whether it orders its rows.

It knows strings, quoted identifiers and comments, so a ``;`` or ``ORDER BY`` inside a string or a comment is never
taken for one outside. Every pattern is possessive and anchored at the scan position: one linear pass over the text,
however hostile (an unclosed quote or comment runs to the end of the text).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

_TOKEN = re.compile(
    r"""
    (?P<space>\s++)
    | (?P<comment>--[^\n]*+|/\*(?:[^*]|\*(?!/))*+(?:\*/)?)
    | (?P<string>'(?:[^']|'')*+'?)
    | (?P<quoted>"(?:[^"]|"")*+"?|`(?:[^`]|``)*+`?|\[[^\]]*+\]?)
    | (?P<word>[A-Za-z_][A-Za-z0-9_$]*+)
    | (?P<number>[0-9][0-9A-Za-z_.]*+|\.[0-9][0-9A-Za-z_]*+)
    | (?P<symbol>.)
    """,
    re.X | re.S,
)

# Words that begin a statement of their own: one of them right after a ``;`` chains another statement.
STATEMENT_KEYWORDS = frozenset(
    "ALTER ANALYZE ATTACH BEGIN COMMIT CREATE DELETE DETACH DROP END EXPLAIN INSERT PRAGMA REINDEX RELEASE REPLACE "
    "ROLLBACK SAVEPOINT SELECT UPDATE VACUUM VALUES WITH".split()
)


class Token(NamedTuple):
    kind: str  # word, string, quoted, number, symbol
    text: str
    start: int
    end: int
    blank_line_before: bool  # the whitespace before it holds an empty line

    @property
    def upper(self) -> str:
        return self.text.upper()


def tokens(sql: str, pos: int = 0) -> Iterator[Token]:
    """Tokens from ``pos`` on, without whitespace and comments."""
    blank = False
    while pos < len(sql):
        match = _TOKEN.match(sql, pos)
        assert match is not None  # the last alternative matches any character
        kind = match.lastgroup or "symbol"
        if kind == "space":
            blank = blank or match.group().count("\n") >= 2
        elif kind != "comment":
            yield Token(kind, match.group(), match.start(), match.end(), blank)
            blank = False
        pos = match.end()


def take_statement(text: str, start: int) -> str:
    """The statement that begins at ``start`` in free text: up to its ``;`` (a statement chained right after the
    ``;`` stays in, so a smuggled second statement is seen), an empty line, or the end of the text."""
    end = start
    after_semicolon = False
    for token in tokens(text, start):
        if token.blank_line_before and end > start:
            break
        if after_semicolon and not (token.kind == "word" and token.upper in STATEMENT_KEYWORDS):
            break
        after_semicolon = token.text == ";"
        end = token.end
    return text[start:end].strip()


def statements(sql: str) -> list[list[Token]]:
    """The tokens of each non-empty statement, split at ``;``."""
    found: list[list[Token]] = [[]]
    for token in tokens(sql):
        if token.text == ";":
            found.append([])
        else:
            found[-1].append(token)
    return [s for s in found if s]


def without_word(sql: str, word: str) -> str:
    """``sql`` with every occurrence of the keyword ``word`` cut out (never one inside a string, a quoted name or
    a comment)."""
    kept = []
    pos = 0
    for token in tokens(sql):
        if token.kind == "word" and token.upper == word:
            kept.append(sql[pos:token.start])
            pos = token.end
    kept.append(sql[pos:])
    return "".join(kept)


def orders_rows(statement: list[Token]) -> bool:
    """Whether the statement's result is ordered: an ``ORDER BY`` outside every parenthesis (one inside a subquery
    or a window does not order the rows that come out)."""
    depth = 0
    previous = ""
    for token in statement:
        if token.text == "(":
            depth += 1
        elif token.text == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and token.kind == "word":
            if previous == "ORDER" and token.upper == "BY":
                return True
            previous = token.upper
            continue
        previous = ""
    return False
