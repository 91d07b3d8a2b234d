"""Reading Lean 4 source as the verifier needs it: tokens without comments, strings or whitespace, and the theorem a
reference states.

The lexer errs towards seeing code: comments nest (``/- /- -/ -/``) as Lean's do, ``--`` inside a string is a
string, and anything it cannot close (a comment, a string) is refused rather than guessed. Tokens are what the
statement comparison and the static refusals work on, so ``(x:ℕ)`` and ``( x : ℕ )`` read the same, a comment never
hides or forges a keyword, and look-alike characters stay different characters (no Unicode folding).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import NamedTuple

THEOREM_KEYWORDS = frozenset({"theorem", "lemma"})


class LeanSourceError(ValueError):
    """Source the lexer will not guess about (an unclosed comment or string)."""


class Token(NamedTuple):  # a tuple: a file's thousands of tokens are built fast
    text: str
    start: int  # offset of the first character in the source
    end: int  # offset after the last character
    line: int  # 1-based
    kind: str  # "ident", "number", "string", "char", "hash" (a #command), "symbol"


_CHAR_LITERAL = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^'\\\n])'")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# Lean reads these letters as notation, not as part of a name.
_NOT_IDENT = frozenset("λΠΣ")
# The common run of name characters (letters, digits, _ ' ! ?, a dot between name parts), consumed at C speed; the
# loop below takes over at anything rarer.
_IDENT_REST = re.compile(r"(?:[A-Za-z0-9_'!?]|\.(?=[A-Za-z0-9_'!?]))*")
_BLANKS = re.compile(r"[ \t\r]+")


def _ident_start(c: str) -> bool:
    if c in _NOT_IDENT:
        return False
    return c == "_" or c.isalpha() or unicodedata.category(c) in ("Lo", "Lm", "Nl")


def _ident_char(c: str) -> bool:
    return _ident_start(c) or c.isdigit() or c in "'!?" or unicodedata.category(c) == "No"


def lex(src: str) -> list[Token]:
    tokens: list[Token] = []
    i, n, line = 0, len(src), 1

    def add(kind: str, start: int, end: int) -> None:
        tokens.append(Token(src[start:end], start, end, line, kind))

    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r":
            i = _BLANKS.match(src, i).end()  # type: ignore[union-attr]  # c matched
        elif c.isspace():
            i += 1
        elif src.startswith("--", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/-", i):
            depth, j = 1, i + 2
            while depth:
                if j >= n:
                    raise LeanSourceError(f"unterminated comment starting on line {line}")
                if src.startswith("/-", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("-/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += src.count("\n", i, j)
            i = j
        elif c == '"' and tokens and tokens[-1].end == i and tokens[-1].kind == "ident" \
                and (tokens[-1].text.endswith("!") or tokens[-1].text == "r"):
            # An interpolated string (s!"{x}") holds code, a raw one (r#"..."#) ends elsewhere than a plain one:
            # reading either as a plain string could hide code from the rules, so neither is accepted.
            raise LeanSourceError(f"line {line}: interpolated and raw strings are not accepted in a proof")
        elif c == "#" and tokens and tokens[-1].end == i and tokens[-1].text == "r":
            raise LeanSourceError(f"line {line}: interpolated and raw strings are not accepted in a proof")
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            if j >= n:
                raise LeanSourceError(f"unterminated string starting on line {line}")
            add("string", i, j + 1)
            line += src.count("\n", i, j)
            i = j + 1
        elif c == "'" and (m := _CHAR_LITERAL.match(src, i)) and not (tokens and tokens[-1].end == i
                                                                     and tokens[-1].kind == "ident"):
            add("char", i, m.end())
            i = m.end()
        elif c == "«":
            j = src.find("»", i)
            if j < 0:
                raise LeanSourceError(f"unterminated «name» on line {line}")
            add("ident", i, j + 1)
            line += src.count("\n", i, j)
            i = j + 1
        elif _ident_start(c):
            j = _IDENT_REST.match(src, i + 1).end()  # type: ignore[union-attr]  # matches the empty string
            while j < n and (_ident_char(src[j]) or (src[j] == "." and j + 1 < n and _ident_char(src[j + 1]))):
                j = _IDENT_REST.match(src, j + 1).end()  # type: ignore[union-attr]  # (rare characters)
            add("ident", i, j)
            i = j
        elif c.isdigit():
            m = _NUMBER.match(src, i)
            j = m.end() if m else i + 1
            add("number", i, j)
            i = j
        elif c == "#" and i + 1 < n and src[i + 1].isalpha():
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] in "_!"):
                j += 1
            add("hash", i, j)
            i = j
        elif src.startswith(":=", i) or src.startswith("@[", i):
            add("symbol", i, i + 2)
            i += 2
        else:
            add("symbol", i, i + 1)
            i += 1
    return tokens


def words(tokens: list[Token]) -> str:
    """The tokens as one comparable string: comments gone, whitespace irrelevant."""
    return " ".join(t.text for t in tokens)


_OPEN_BRACKETS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "@[": "]"}
_CLOSE_BRACKETS = frozenset(_OPEN_BRACKETS.values())
_BINDERS = frozenset({"let", "have", "letI", "haveI"})


def signature_end(tokens: list[Token], start: int) -> int | None:
    """Index of the ``:=`` that ends the signature beginning at ``start`` (outside every bracket), else None."""
    depth = 0
    bindings = 0  # `let x := v; ...` / `have h := p; ...` in the type: their := is not the signature's end
    for k in range(start, len(tokens)):
        text = tokens[k].text
        if text in _OPEN_BRACKETS:
            depth += 1
        elif text in _CLOSE_BRACKETS:
            depth -= 1
        elif text in _BINDERS and depth == 0:
            bindings += 1
        elif text == ":=" and depth == 0:
            if not bindings:
                return k
            bindings -= 1
        elif tokens[k].kind == "ident" and text in THEOREM_KEYWORDS and depth == 0:
            return None  # the next declaration began before this one said :=
    return None


def declarations_named(tokens: list[Token], name: str) -> list[int]:
    """Indices of ``theorem``/``lemma`` keywords declaring ``name`` (also spelled ``_root_.name``)."""
    return [k for k in range(len(tokens) - 1)
            if tokens[k].kind == "ident" and tokens[k].text in THEOREM_KEYWORDS
            and tokens[k + 1].text in (name, f"_root_.{name}")]


@dataclass(frozen=True)
class Statement:
    """A reference theorem: its name, its signature (binders and type, as tokens) and what precedes it."""

    name: str
    signature: str  # words() of the tokens after the name, up to the ``:=``
    imports: tuple[str, ...]  # modules the preamble imports
    preamble: str  # source before the theorem: imports, options, opens, definitions the statement uses
    preamble_tokens: tuple[Token, ...]
    header_source: str  # ``theorem name binders : type :=``, as the reference wrote it

    @property
    def opened(self) -> frozenset[str]:
        """Every name an ``open`` of the preamble mentions."""
        return frozenset(opened_names(list(self.preamble_tokens)))


def opened_names(tokens: list[Token]) -> list[str]:
    names: list[str] = []
    for k, tok in enumerate(tokens):
        if tok.kind == "ident" and tok.text == "open":
            names += open_clause(tokens, k)[0]
    return names


OPEN_STOP = frozenset({"in"})


def open_clause(tokens: list[Token], k: int) -> tuple[list[str], int]:
    """(names, index after the clause) of the ``open`` at ``k``: identifiers and bracketed lists, up to a keyword."""
    names: list[str] = []
    j = k + 1
    while j < len(tokens):
        tok = tokens[j]
        if tok.kind == "ident" and tok.text not in COMMAND_KEYWORDS and tok.text not in OPEN_STOP:
            names.append(tok.text)
        elif tok.text not in ("(", ")", "→"):
            break
        j += 1
    return names, j


# Keywords that begin a command: a name list after ``open`` stops at any of them.
COMMAND_KEYWORDS = frozenset({
    "import", "open", "namespace", "section", "end", "variable", "universe", "set_option", "theorem", "lemma", "def",
    "abbrev", "example", "instance", "axiom", "constant", "opaque", "structure", "class", "inductive", "mutual",
    "private", "protected", "noncomputable", "unsafe", "partial", "attribute", "notation", "macro", "syntax", "elab",
    "macro_rules", "elab_rules", "include", "omit", "export", "deriving", "infix", "infixl", "infixr", "prefix",
    "postfix", "scoped", "local",
})


def parse_reference(text: str, default_header: str) -> Statement:
    """The last ``theorem``/``lemma`` of ``text`` and its preamble; ``default_header`` when it imports nothing."""
    tokens = lex(text)
    keywords = [k for k, t in enumerate(tokens) if t.kind == "ident" and t.text in THEOREM_KEYWORDS]
    if not keywords:
        raise ValueError("the reference states no theorem (expected `theorem NAME ... := by sorry`)")
    k = keywords[-1]
    if k + 1 >= len(tokens) or tokens[k + 1].kind != "ident":
        raise ValueError("the reference's theorem has no name")
    name = tokens[k + 1].text.removeprefix("_root_.")
    end = signature_end(tokens, k + 2)
    if end is None:
        raise ValueError(f"the reference's theorem {name} has no `:=` after its statement")
    # The preamble stops at the last token before the theorem, so a doc comment on the theorem stays behind.
    cut = tokens[k - 1].end if k else 0
    preamble = text[:cut].rstrip()
    preamble_tokens = tokens[:k]
    if not any(t.text == "import" for t in preamble_tokens):
        preamble = f"{default_header.strip()}\n\n{preamble}".rstrip()
        preamble_tokens = lex(preamble)
    imports = tuple(preamble_tokens[j + 1].text for j, t in enumerate(preamble_tokens[:-1])
                    if t.kind == "ident" and t.text == "import")
    return Statement(name, words(tokens[k + 2:end]), imports, preamble, tuple(preamble_tokens),
                     text[tokens[k].start:tokens[end].end])
