"""Static refusals: what a proof may not contain, decided on its tokens before any Lean server is asked.

Each refusal names its rule (``Refusal.rule``), so a trainer can tell a changed statement from a ``sorry`` from an
attempt to turn the checker off. The rules read tokens (``source.lex``), never raw text: a keyword in a comment or
a string is not code, and a keyword the lexer sees is one Lean sees. The server's answer (sorries, warnings, the
axioms ``#print axioms`` lists) is checked afterwards by the verifier; these rules are the first line, not the only
one.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from verifiers.kinds.lean.source import (
    THEOREM_KEYWORDS,
    Statement,
    Token,
    declarations_named,
    open_clause,
    signature_end,
    words,
)


@dataclass(frozen=True)
class Refusal:
    rule: str
    message: str


# Identifier -> (rule, why). Checked wherever the token appears in the proof.
FORBIDDEN: dict[str, tuple[str, str]] = {
    "sorry": ("sorry", "leaves a goal unproved"),
    "admit": ("sorry", "leaves a goal unproved"),
    "sorryAx": ("sorry", "leaves a goal unproved"),
    "axiom": ("axiom", "declares an axiom"),
    "axioms": ("axiom", "declares axioms"),
    "constant": ("axiom", "declares a constant without a definition"),
    "native_decide": ("axiom", "trusts compiled code (axiom Lean.ofReduceBool)"),
    "ofReduceBool": ("axiom", "trusts compiled code (Lean.ofReduceBool)"),
    "ofReduceNat": ("axiom", "trusts compiled code (Lean.ofReduceNat)"),
    "unsafe": ("unsafe", "code escapes the kernel's checks"),
    "implemented_by": ("unsafe", "swaps a definition's code"),
    "extern": ("unsafe", "swaps a definition's code"),
    "csimp": ("unsafe", "swaps a definition's code"),
    "macro": ("macro", "defines a macro (can redefine tactics or notation)"),
    "macro_rules": ("macro", "adds macro rules (can redefine tactics or notation)"),
    "syntax": ("macro", "defines syntax (can redefine tactics or notation)"),
    "elab": ("macro", "defines an elaborator"),
    "elab_rules": ("macro", "adds elaboration rules"),
    "declare_syntax_cat": ("macro", "declares a syntax category"),
    "notation": ("macro", "defines notation"),
    "infix": ("macro", "defines notation"),
    "infixl": ("macro", "defines notation"),
    "infixr": ("macro", "defines notation"),
    "prefix": ("macro", "defines notation"),
    "postfix": ("macro", "defines notation"),
    "binder_predicate": ("macro", "defines notation"),
    "run_cmd": ("meta", "runs meta code while checking"),
    "run_tac": ("meta", "runs meta code while checking"),
    "run_elab": ("meta", "runs meta code while checking"),
    "run_meta": ("meta", "runs meta code while checking"),
    "by_elab": ("meta", "runs meta code while checking"),
    "initialize": ("meta", "registers code to run on the Lean server"),
    "builtin_initialize": ("meta", "registers code to run on the Lean server"),
    "import": ("import", "imports beyond the reference's"),
    "namespace": ("scope", "a namespace changes how the statement's names resolve"),
    "variable": ("scope", "can add hypotheses to the statement"),
    "include": ("scope", "can add hypotheses to the statement"),
    "omit": ("scope", "changes which variables a statement takes"),
    "export": ("scope", "changes how the statement's names resolve"),
    "instance": ("instance", "a new instance can change what the statement's notation means"),
    "deriving": ("instance", "derives instances"),
    "attribute": ("attribute", "changes attributes of existing declarations"),
}

# Search tactics: Lean's kernel checks what they find, but the result depends on the library version and costs a
# search per check; refused unless options.allow_search_tactics.
SEARCH_TACTICS = frozenset({"exact?", "apply?", "rw?", "rw_search", "library_search", "hint"})

# Attributes a helper lemma may carry; any other (instance, macro, implemented_by, ...) is refused.
ALLOWED_ATTRIBUTES = frozenset({"simp", "reducible", "irreducible", "inline", "norm_cast", "push_cast", "ext"})

# Options a proof may set. maxHeartbeats must stay positive: 0 removes Lean's own limit.
LIMIT_OPTIONS = frozenset({"maxHeartbeats", "synthInstance.maxHeartbeats"})
ALLOWED_OPTIONS = LIMIT_OPTIONS | {"maxRecDepth", "synthInstance.maxSize", "linter.unusedVariables",
                                   "linter.unusedTactic", "linter.unreachableTactic", "linter.style.longLine"}
ALLOWED_OPTION_PREFIXES = ("pp.",)

# #-commands a proof may use (output only); #exit hides the rest of the file, #eval/#print run or print anything.
ALLOWED_HASH = frozenset({"#check"})

MODIFIERS = frozenset({"private", "protected", "noncomputable", "unsafe", "partial", "nonrec"})


_SUSPECT = re.compile(r"[^\x20-\x7e\n\t\r]")  # all but printable ASCII and the three line characters


def hidden_characters(text: str) -> Refusal | None:
    """Invisible format characters (zero-width, bidi controls) and whitespace Lean does not take for whitespace
    (no-break and other spaces, line separators) make what a reader or the lexer sees differ from what Lean reads."""
    for m in _SUSPECT.finditer(text):
        i, c = m.start(), m.group()
        category = unicodedata.category(c)
        if category in ("Cf", "Co", "Cs", "Zl", "Zp") or (category == "Zs" and c != " ") \
                or (category == "Cc" and c not in "\n\t\r"):
            line = text.count("\n", 0, i) + 1
            return Refusal("unicode", f"invisible character U+{ord(c):04X} on line {line}")
    return None


# What even a reference's preamble may not hold: it runs on the Lean server for every proof, and the service must not
# relay code execution there (a client's reference or default_header is no more trusted than a policy's proof).
PREAMBLE_RULES = frozenset({"sorry", "axiom", "unsafe", "meta", "exit"})


def check_preamble(statement: Statement) -> Refusal | None:
    breaches = token_refusals(list(statement.preamble_tokens), allow_search_tactics=True)
    return next((r for r in breaches if r.rule in PREAMBLE_RULES), None)


def check_imports(tokens: list[Token], statement: Statement) -> Refusal | None:
    for k, tok in enumerate(tokens[:-1]):
        if tok.kind == "ident" and tok.text == "import" and tokens[k + 1].text not in statement.imports:
            return Refusal("import", f"line {tok.line}: imports {tokens[k + 1].text}, which the reference does not")
    return None


def token_refusals(tokens: list[Token], *, allow_search_tactics: bool) -> Iterator[Refusal]:
    """Rules that hold wherever the token stands, every breach in order."""
    for k, tok in enumerate(tokens):
        where = f"line {tok.line}"
        name = _bare(tok.text) if tok.kind == "ident" else ""
        if name in FORBIDDEN or name.rpartition(".")[2] in FORBIDDEN:
            rule, why = FORBIDDEN.get(name) or FORBIDDEN[name.rpartition(".")[2]]
            yield Refusal(rule, f"{where}: `{tok.text}` {why}")
        elif tok.kind == "ident" and tok.text in SEARCH_TACTICS and not allow_search_tactics:
            yield Refusal("search_tactic", f"{where}: `{tok.text}` searches the library instead of giving a proof")
        elif tok.kind == "hash" and tok.text not in ALLOWED_HASH:
            yield Refusal("exit" if tok.text == "#exit" else "meta", f"{where}: `{tok.text}` is not allowed in a proof")
        elif tok.text == "@[" and (refusal := _check_attribute(tokens, k)):
            yield refusal
        elif tok.kind == "ident" and tok.text == "set_option" and (refusal := _check_option(tokens, k)):
            yield refusal


def check_tokens(tokens: list[Token], *, allow_search_tactics: bool) -> Refusal | None:
    return next(token_refusals(tokens, allow_search_tactics=allow_search_tactics), None)


def _bare(name: str) -> str:
    """A name without «» quoting: «sorryAx» and _root_.«Lean».ofReduceBool name what sorryAx and Lean.ofReduceBool
    name."""
    return name.replace("«", "").replace("»", "")


def _check_attribute(tokens: list[Token], k: int) -> Refusal | None:
    j = k + 1
    while j < len(tokens) and tokens[j].text != "]":
        tok = tokens[j]
        if tok.kind == "ident" and tok.text not in ALLOWED_ATTRIBUTES and tok.text not in ("local", "scoped"):
            rule = FORBIDDEN.get(tok.text, ("attribute", ""))[0]
            return Refusal(rule, f"line {tok.line}: attribute @[{tok.text}] is not allowed in a proof")
        if tok.kind != "ident" and tok.text != ",":
            return Refusal("attribute", f"line {tok.line}: attribute arguments are not allowed in a proof")
        j += 1
    return None


def _check_option(tokens: list[Token], k: int) -> Refusal | None:
    name = tokens[k + 1].text if k + 1 < len(tokens) else ""
    value = tokens[k + 2].text if k + 2 < len(tokens) else ""
    line = tokens[k].line
    if name not in ALLOWED_OPTIONS and not name.startswith(ALLOWED_OPTION_PREFIXES):
        return Refusal("option", f"line {line}: `set_option {name}` is not allowed in a proof"
                       + (" (it skips the kernel's type check)" if "skipKernel" in name else ""))
    if name in LIMIT_OPTIONS and value.replace("_", "").strip("0") == "":
        return Refusal("option", f"line {line}: `set_option {name} 0` turns Lean's own limit off")
    return None


def check_statement(tokens: list[Token], statement: Statement) -> tuple[int, Refusal | None]:
    """The proof must declare the reference's theorem exactly once, with the same signature and no modifiers.
    Returns the index of its keyword (or -1) and the refusal, if any."""
    found = declarations_named(tokens, statement.name)
    name = statement.name
    if not found:
        return -1, Refusal("statement", f"the proof does not state theorem {name}")
    if len(found) > 1:
        return -1, Refusal("statement", f"theorem {name} is declared {len(found)} times")
    k = found[0]
    end = signature_end(tokens, k + 2)
    if end is None:
        return -1, Refusal("statement", f"theorem {name} has no `:=` after its statement")
    given = words(tokens[k + 2:end])
    if given != statement.signature:
        return -1, Refusal("statement", f"theorem {name} states `{_clip(given)}`, the reference states "
                           f"`{_clip(statement.signature)}`")
    before = tokens[k - 1] if k else None
    if before is not None and (before.text in MODIFIERS or before.text == "]" and _closes_attribute(tokens, k - 1)):
        return -1, Refusal("statement", f"theorem {name} must be declared without modifiers or attributes")
    return k, None


def _closes_attribute(tokens: list[Token], k: int) -> bool:
    depth = 0
    for j in range(k, -1, -1):
        if tokens[j].text == "]":
            depth += 1
        elif tokens[j].text in ("[", "@["):
            depth -= 1
            if depth == 0:
                return tokens[j].text == "@["
    return False


def check_blocks(tokens: list[Token]) -> Refusal | None:
    """Every ``end`` closes a ``section`` or ``mutual`` block the proof opened, never a scope of the reference's
    preamble (leaving its namespace would change what the statement's names mean)."""
    depth = 0
    for tok in tokens:
        if tok.kind != "ident":
            continue
        if tok.text in ("section", "mutual"):
            depth += 1
        elif tok.text == "end":
            depth -= 1
            if depth < 0:
                return Refusal("scope", f"line {tok.line}: `end` closes a scope the proof did not open")
    return None


def check_scope(tokens: list[Token], main: int, statement: Statement) -> Refusal | None:
    """Before the main theorem a proof may only open what the reference opens, and never `open ... in` it."""
    refusal = check_blocks(tokens)
    if refusal:
        return refusal
    allowed = statement.opened
    k = 0
    while k < main:
        tok = tokens[k]
        if tok.kind == "ident" and tok.text == "open":
            names, after = open_clause(tokens, k)
            extra = [n for n in names if n not in allowed]
            if after + 1 == main and tokens[after].text == "in":
                return Refusal("open_in", f"line {tok.line}: `open ... in` in front of theorem {statement.name} "
                               "changes how its statement reads")
            if extra:
                return Refusal("scope", f"line {tok.line}: opens {', '.join(extra)}, which the reference does not "
                               "open before its statement")
            k = after
        else:
            k += 1
    return None


def check_proof(tokens: list[Token], statement: Statement, *, allow_search_tactics: bool) -> Refusal | None:
    """Every static rule, most specific first."""
    refusal = check_imports(tokens, statement)
    if refusal:
        return refusal
    main, refusal = check_statement(tokens, statement)
    if refusal:
        return refusal
    return check_tokens(tokens, allow_search_tactics=allow_search_tactics) or check_scope(tokens, main, statement)


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


__all__ = ["THEOREM_KEYWORDS", "Refusal", "check_proof", "hidden_characters"]
