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


def _preamble_copy(tokens: list[Token], statement: Statement) -> int:
    """How many leading ``tokens`` repeat the reference's preamble (past its imports): 0 or all of it."""
    own = list(statement.preamble_tokens)
    own = own[_after_imports(own):]
    if own and [t.text for t in tokens[:len(own)]] == [t.text for t in own]:
        return len(own)
    return 0


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
        if any(t.kind == "ident" and t.text in _DECLARING for t in tokens):
            # The proof's own tokens are checked (lines as the response numbers them), from past its imports and
            # its copy of the reference's preamble.
            mode, rest = "file", tokens[start + _preamble_copy(tokens[start:], statement):]
            body = code[rest[0].start:] if rest else ""
        else:
            mode = "tactics"
            body = _tactics(code[tokens[start].start:] if start < len(tokens) else "", statement)
            rest = lex(body)
        refusal = check_proof(rest, statement, allow_search_tactics=allow_search_tactics)
    except LeanSourceError as exc:
        return Refusal("syntax", str(exc))
    if refusal:
        return refusal
    return Snippet(f"{statement.preamble}\n\n{body.rstrip()}\n\n#print axioms {statement.name}\n", mode)
