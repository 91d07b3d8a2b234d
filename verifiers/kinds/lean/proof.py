"""From a completion to the snippet the Lean server checks.

The snippet is the reference's own preamble (its imports, options, opens and definitions: trusted, never the
policy's), then the proof, then ``#print axioms NAME``. A proof may restate the reference's header (its imports must
be among the reference's; a copy of the preamble is dropped so its definitions are not declared twice) or give only
the tactics, which are then placed under the reference's statement.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

from verifiers.kinds.lean.checks import Refusal, check_imports, check_proof, hidden_characters
from verifiers.kinds.lean.source import COMMAND_KEYWORDS, LeanSourceError, Statement, Token, lex

# Keywords that make a text a Lean file rather than a tactic script.
_DECLARING = COMMAND_KEYWORDS - {"open", "set_option", "local", "scoped", "end", "in"}


@dataclass(frozen=True)
class Snippet:
    code: str
    mode: str  # "file" (the proof states the theorem) or "tactics" (placed under the reference's statement)


def _after_imports(tokens: list[Token]) -> int:
    k = 0
    while k + 1 < len(tokens) and tokens[k].kind == "ident" and tokens[k].text == "import":
        k += 2
    return k


def _strip_preamble_copy(body: str, statement: Statement) -> str:
    """``body`` without a leading copy of the reference's preamble (past its imports)."""
    own = list(statement.preamble_tokens)
    own = own[_after_imports(own):]
    if not own:
        return body
    tokens = lex(body)
    if len(tokens) >= len(own) and [t.text for t in tokens[:len(own)]] == [t.text for t in own]:
        return body[tokens[len(own)].start:] if len(tokens) > len(own) else ""
    return body


def _tactics(code: str, statement: Statement) -> str:
    script = code.strip()
    if script.startswith(":="):
        script = script[2:].strip()
    if script.startswith("by") and (len(script) == 2 or not script[2].isalnum() and script[2] not in "_'"):
        script = script[2:]
    return f"{statement.header_source} by\n{textwrap.indent(textwrap.dedent(script.strip(chr(10))), '  ')}"


def build_snippet(code: str, statement: Statement, *, allow_search_tactics: bool) -> Snippet | Refusal:
    refusal = hidden_characters(code)
    if refusal:
        return refusal
    try:
        tokens = lex(code)
        refusal = check_imports(tokens, statement)
        if refusal:
            return refusal
        start = _after_imports(tokens)
        body = code[tokens[start].start:] if start < len(tokens) else ""
        if any(t.kind == "ident" and t.text in _DECLARING for t in tokens):
            mode, body = "file", _strip_preamble_copy(body, statement)
        else:
            mode, body = "tactics", _tactics(body, statement)
        refusal = check_proof(lex(body), statement, allow_search_tactics=allow_search_tactics)
    except LeanSourceError as exc:
        return Refusal("syntax", str(exc))
    if refusal:
        return refusal
    return Snippet(f"{statement.preamble}\n\n{body.rstrip()}\n\n#print axioms {statement.name}\n", mode)
