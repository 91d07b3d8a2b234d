"""The ``lean`` verifier: a Lean 4 proof of the reference's theorem, checked by a Kimina Lean server.

Score 1 only when the proof keeps the reference's statement, passes every static rule (``checks``), and the server
reports no error, no sorry, and axioms among ``propext``, ``Classical.choice`` and ``Quot.sound`` for the theorem.
A refusal is ``rejected`` naming its rule; a Lean error is a 0 naming the first error; the server's own time limit
is ``timeout``; a server that is down is ``unavailable``; an answer outside the protocol is ``error``.
"""
from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.context import Context
from verifiers.kinds.code.extract import extract_program
from verifiers.kinds.lean.checks import Refusal, check_preamble
from verifiers.kinds.lean.client import LEAN
from verifiers.kinds.lean.proof import build_snippet
from verifiers.kinds.lean.protocol import LeanServerError, SnippetResult
from verifiers.kinds.lean.source import LeanSourceError, Statement, parse_reference
from verifiers.types import InvalidReference, Verdict, VerifierUnavailable

# The header of miniF2F, Lean Workbook, DeepSeek-Prover, Goedel-Prover and Kimina-Prover statements.
DEFAULT_HEADER = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat " \
                 "Topology Rat"
STANDARD_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
_AXIOM_REPORT = re.compile(r"^'(?P<name>[^']+)' (?:depends on axioms: \[(?P<axioms>[^\]]*)\]|does not depend on any "
                           r"axioms)", re.DOTALL)
_SORRY_WARNING = "declaration uses 'sorry'"


class LeanOptions(BaseOptions):
    lean_timeout_s: int | None = Field(
        None, ge=1, le=3600, description="Lean time limit per proof, sent to the server (default: the server "
        "setting lean_timeout_s).")
    default_header: str = Field(
        DEFAULT_HEADER, max_length=10_000, description="Preamble used when the reference imports nothing.")
    allow_search_tactics: bool = Field(
        False, description="Accept exact?/apply?/rw? (the kernel checks what they find; results vary with Mathlib).")
    max_proof_chars: int = Field(200_000, ge=1, description="Longer proofs are rejected before any call.")


def statement_of(reference: Any, default_header: str) -> Statement:
    if isinstance(reference, dict):
        text = reference.get("formal_statement", reference.get("statement"))
        header = reference.get("header", "")
        if not isinstance(text, str) or not isinstance(header, str):
            raise InvalidReference("a lean reference is a statement string or {formal_statement, header?}")
        text = f"{header}\n\n{text}" if header else text
    elif isinstance(reference, str):
        text = reference
    else:
        raise InvalidReference("a lean reference is a statement string or {formal_statement, header?}")
    try:
        statement = parse_reference(text, default_header)
    except (ValueError, LeanSourceError) as exc:
        raise InvalidReference(str(exc)) from None
    refusal = check_preamble(statement)
    if refusal is not None:
        raise InvalidReference(f"the reference's preamble (with default_header) is refused: {refusal.rule}: "
                               f"{refusal.message}")
    return statement


def _rejected(refusal: Refusal, **details: Any) -> Verdict:
    return Verdict.rejected(f"{refusal.rule}: {refusal.message}", rule=refusal.rule, **details)


def _names(printed: str, name: str) -> bool:
    """Whether Lean's printed name is the theorem's (qualified when the reference states it inside a namespace)."""
    printed, name = (n.replace("«", "").replace("»", "") for n in (printed, name))
    return printed == name or printed.endswith("." + name)


def judge(result: SnippetResult, name: str) -> Verdict:
    """The verdict a server result gives the theorem ``name``."""
    details: dict[str, Any] = {"lean_time_s": result.time}
    if result.error is not None:
        if result.timed_out:
            return Verdict.timeout(f"Lean server time limit: {result.error}", **details)
        raise LeanServerError(f"the Lean server could not check the proof: {result.error[:300]}")
    if result.repl_error is not None:
        raise LeanServerError(f"the Lean REPL failed: {result.repl_error[:300]}")
    errors = [m for m in result.messages if m.severity == "error"]
    if errors:
        first = min(errors, key=lambda m: (m.line, m.column))  # the earliest in the file, whatever the order
        return Verdict.ok(0.0, f"Lean error at {first.where()}: {first.data[:500]}", rule="lean_error",
                          errors=len(errors), **details)
    if result.sorries or any(_SORRY_WARNING in m.data for m in result.messages if m.severity == "warning"):
        return _rejected(Refusal("sorry", "the Lean server reports a sorry"), **details)
    reports = [m for m in result.messages if m.severity == "info" and (r := _AXIOM_REPORT.match(m.data))
               and _names(r.group("name"), name)]
    if not reports:
        raise LeanServerError(f"the Lean server returned no `#print axioms {name}` output")
    if len(reports) > 1:
        return _rejected(Refusal("axioms", "the proof prints its own axiom report"), **details)
    match = _AXIOM_REPORT.match(reports[0].data)
    assert match is not None
    axioms = sorted({a.strip() for a in (match.group("axioms") or "").split(",") if a.strip()})
    details["axioms"] = axioms
    if "sorryAx" in axioms:
        return _rejected(Refusal("sorry", f"{name} depends on sorryAx"), **details)
    extra = [a for a in axioms if a not in STANDARD_AXIOMS]
    if extra:
        return _rejected(Refusal("axioms", f"{name} depends on {', '.join(extra)}"), **details)
    return Verdict.ok(1.0, "Lean accepted the proof", **details)


class LeanVerifier(Verifier[LeanOptions]):
    name = "lean"
    description = ("Lean 4 proof of the reference theorem, checked by a Kimina Lean server (lean_server_url); "
                   "refuses changed statements, sorry, axioms, unsafe options and metaprogramming.")
    Options = LeanOptions
    execution = "async"
    default_timeout_s = 300.0

    async def acheck(self, response: str, reference: Any, options: LeanOptions, ctx: Context) -> Verdict:
        statement = statement_of(reference, options.default_header)
        extracted = extract_program(response, "lean")
        if extracted is None:
            return Verdict.no_answer("no Lean proof found in the response")
        if len(extracted.code) > options.max_proof_chars:
            return _rejected(Refusal("too_long", f"the proof has {len(extracted.code)} characters, more than "
                                     f"{options.max_proof_chars}"))
        snippet = build_snippet(extracted.code, statement, allow_search_tactics=options.allow_search_tactics)
        if isinstance(snippet, Refusal):
            return _rejected(snippet, source=extracted.source)
        lean = ctx.resources.get(LEAN)
        if lean is None:
            raise VerifierUnavailable("no Lean server is configured (set REWARD_SERVICE_LEAN_SERVER_URL)")
        result = await lean.check(snippet.code, options.lean_timeout_s)
        verdict = judge(result, statement.name)
        verdict.details.update(source=extracted.source, mode=snippet.mode)
        return verdict


VERIFIERS: list[Verifier[Any]] = [LeanVerifier()]
