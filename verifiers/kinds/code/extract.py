"""Find the program in a model completion: the last fenced block of the wanted language, else the whole text.

A fence tagged with another language (```bash, ```text) is never taken for the program; an untagged fence is used
when no tagged one exists; an unclosed last fence (a generation cut at max tokens) runs to the end of the text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Tag aliases models write in fences, per sandbox language name.
# A test mode (go_test, rust_test, pytest, junit) takes the program from its language's fences.
ALIASES: dict[str, tuple[str, ...]] = {
    "python": ("python", "python3", "py", "py3", "pytest"),
    "c": ("c", "h"),
    "cpp": ("cpp", "c++", "cxx", "cc", "hpp"),
    "javascript": ("javascript", "js", "node", "nodejs", "mjs", "cjs", "jsx"),
    "typescript": ("typescript", "ts", "tsx", "mts"),
    "java": ("java", "junit"),
    "go": ("go", "golang", "go_test"),
    "rust": ("rust", "rs", "rust_test"),
    "bash": ("bash", "sh", "shell"),
    "lean": ("lean4", "lean"),
    "csharp": ("csharp", "cs", "c#", "c_sharp", "mono"),
    "php": ("php",),
    "lua": ("lua",),
    "r": ("r", "rscript"),
    "perl": ("perl", "pl"),
    "ruby": ("ruby", "rb"),
    "scala": ("scala",),
    "kotlin": ("kotlin", "kt", "kts"),
    "racket": ("racket", "rkt", "scheme"),
    "d": ("d", "dlang", "d_ut"),
    "verilog": ("verilog", "v", "systemverilog", "sv", "iverilog"),
    "haskell": ("haskell", "hs"),
    "ocaml": ("ocaml", "ml"),
    "elixir": ("elixir", "ex", "exs"),
    "fortran": ("fortran", "f90", "f95", "f"),
}
_CANONICAL = {alias: name for name, aliases in ALIASES.items() for alias in aliases}
# A test mode whose programs come in more than one language's fences (jest runs TypeScript and JavaScript).
MODE_FENCES: dict[str, tuple[str, ...]] = {"jest": ("typescript", "javascript")}

# Possessive quantifiers (Python 3.11): no backtracking into the fence or its padding, so a line of 100k backticks
# or spaces is one linear scan (this runs on the event loop). Giving characters back could never produce another
# match: whatever the fence run gives up, the info-string part ([^\n]*) would take anyway.
_FENCE = re.compile(r"^[ \t]*+(`{3,}+|~{3,}+)[ \t]*+([^\s`{]*+)[^\n]*+\n", re.M)


@dataclass
class Extracted:
    code: str
    source: str  # "fenced:<tag>", "fenced" (untagged) or "whole_text"


def canonical_language(name: str) -> str:
    return _CANONICAL.get(name.lower(), name.lower())


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(tag, body) of each fenced block in order; a fence closes only on the same fence characters."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return blocks
        fence, tag = opening.group(1), opening.group(2).lower()
        closing = re.compile(rf"^[ \t]*+{re.escape(fence[0])}{{{len(fence)},}}+[ \t]*+$", re.M)
        end = closing.search(text, opening.end())
        body_end = end.start() if end else len(text)
        blocks.append((tag, text[opening.end():body_end]))
        if end is None:
            return blocks
        pos = end.end()


def extract_program(text: str, language: str = "python") -> Extracted | None:
    """None when the completion holds no code at all."""
    wanted = canonical_language(language)
    accepted = MODE_FENCES.get(wanted, (wanted,))
    blocks = fenced_blocks(text)
    tagged = [(canonical_language(tag), body) for tag, body in blocks if tag and canonical_language(tag) in accepted]
    if tagged:
        code, source = tagged[-1][1], f"fenced:{tagged[-1][0]}"
    else:
        untagged = [body for tag, body in blocks if not tag]
        if untagged:
            code, source = untagged[-1], "fenced"
        elif blocks:
            return None  # only blocks of other languages: the program is not there
        else:
            code, source = text, "whole_text"
    if not code.strip():
        return None
    return Extracted(code.rstrip() + "\n", source)
