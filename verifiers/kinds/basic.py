"""First verifiers: exact match, regex and multiple choice. Cheap, but real: they share the registry and the
worker pool with the heavy ones, which is what proves the plumbing."""
from __future__ import annotations

import re
import string
import unicodedata
from typing import Any, Literal

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.types import InvalidReference, Verdict

_WS = re.compile(r"\s+")
_PUNCT = str.maketrans("", "", string.punctuation + "“”‘’«»…–—")


def normalize_text(text: str, *, case: bool = False, whitespace: bool = True, punctuation: bool = False) -> str:
    """Normalise for comparison; each flag says what to *ignore*."""
    text = unicodedata.normalize("NFKC", text)
    if not case:
        text = text.casefold()
    if punctuation:
        text = text.translate(_PUNCT)
    if whitespace:
        text = _WS.sub(" ", text).strip()
    return text


def _references(reference: Any) -> list[str]:
    if isinstance(reference, bool) or reference is None:
        raise InvalidReference("reference must be a string, a number or a list of them")
    if isinstance(reference, (str, int, float)):
        return [str(reference)]
    if isinstance(reference, list) and reference and all(
        isinstance(r, (str, int, float)) and not isinstance(r, bool) for r in reference
    ):
        return [str(r) for r in reference]
    raise InvalidReference("reference must be a string, a number or a non-empty list of them")


class ExactMatchOptions(BaseOptions):
    ignore_case: bool = Field(True, description="Compare case-insensitively.")
    ignore_whitespace: bool = Field(True, description="Collapse runs of whitespace and strip the ends.")
    ignore_punctuation: bool = Field(False, description="Drop ASCII and common Unicode punctuation.")


class ExactMatchVerifier(Verifier[ExactMatchOptions]):
    name = "exact_match"
    description = "Response equals the reference (or any of a list of references) after normalisation."
    Options = ExactMatchOptions
    inline_max_chars = 20_000  # normalisation is linear; no user-supplied pattern

    def check(self, response: str, reference: Any, options: ExactMatchOptions) -> Verdict:
        refs = _references(reference)
        norm = dict(
            case=not options.ignore_case, whitespace=options.ignore_whitespace, punctuation=options.ignore_punctuation
        )
        got = normalize_text(response, **norm)
        if not got:
            return Verdict.no_answer("empty response")
        for ref in refs:
            if got == normalize_text(ref, **norm):
                return Verdict.ok(1.0, "matches the reference", normalized=got, matched=ref)
        return Verdict.ok(0.0, "does not match the reference", normalized=got)


class RegexOptions(BaseOptions):
    mode: Literal["search", "fullmatch"] = Field("search", description="search: anywhere; fullmatch: whole response.")
    ignore_case: bool = False
    multiline: bool = False
    dotall: bool = False


class RegexMatchVerifier(Verifier[RegexOptions]):
    name = "regex"
    description = "Reference is a regular expression (Python syntax) the response must match."
    Options = RegexOptions

    def check(self, response: str, reference: Any, options: RegexOptions) -> Verdict:
        if not isinstance(reference, str) or not reference:
            raise InvalidReference("reference must be a non-empty regular expression string")
        flags = (
            (re.IGNORECASE if options.ignore_case else 0)
            | (re.MULTILINE if options.multiline else 0)
            | (re.DOTALL if options.dotall else 0)
        )
        try:
            pattern = re.compile(reference, flags)
        except re.error as exc:
            raise InvalidReference(f"reference is not a valid regular expression: {exc}") from None
        match = pattern.fullmatch(response) if options.mode == "fullmatch" else pattern.search(response)
        if match is None:
            return Verdict.ok(0.0, "pattern does not match")
        return Verdict.ok(1.0, "pattern matches", span=list(match.span()), match=match.group(0)[:200])


class MultipleChoiceOptions(BaseOptions):
    choices: str = Field("ABCDEFGHIJ", min_length=2, description="The letters that are valid options.")


# Patterns that state a final choice, strongest first. Each captures the letter(s) in group "x".
# Each run of optional filler is ONE quantified group over disjoint alternatives: adjacent optional runs such as
# \s*(?:option\s*)?\s* backtrack quadratically on long whitespace, which a response can be full of.
_MC_PATTERNS = [
    ("boxed", r"\\boxed\{[ \t]*\(?(?P<x>[A-Z])\)?[ \t]*\}"),
    ("answer_is", r"(?:final\s+)?answer\s*(?:is|:)(?:\s|option|[\*\(\[])*(?P<x>(?-i:[A-Z]))\b(?![\w'])"),
    ("option_is", r"(?:correct|right|best)\s+(?:option|choice|answer)\s+is"
                  r"(?:\s|[\*\(\[])*(?P<x>(?-i:[A-Z]))\b(?![\w'])"),
    ("bold", r"\*\*[ \t]*\(?(?P<x>[A-Z])\)?[\.\):]?[ \t]*\*\*"),
    ("parenthesised", r"\((?P<x>[A-Z])\)"),
    # [ \t] not \s: a line-bounded scan (\s under MULTILINE spans newlines and goes quadratic on blank lines).
    ("bare", r"^[ \t]*(?P<x>[A-Z])[\.\)]?[ \t]*$"),
]


# A stated choice followed by more letters ("B or C", "B, C", "B and/or D", "(B)/(C)") names several answers.
_ONE_MORE = re.compile(
    r"(?:\s|\))*(?:,|/|&|\bor\b|\band\b|\band/or\b)(?:\s|option|\()*([A-Z])\)?"
    r"(?=\s*(?:$|[.,;:!?/&]|\bor\b|\band\b))"  # a letter, not a word ("... and I am sure")
)


def _alternatives(response: str, pattern: str, flags: int, choices: str) -> list[str]:
    """Letters chained onto a stated choice: each is another claimed answer (hedging)."""
    extra: list[str] = []
    for m in re.finditer(pattern, response, flags):
        pos = m.end()
        while (more := _ONE_MORE.match(response, pos)) is not None and more.group(1) in choices:
            extra.append(more.group(1))
            pos = more.end()
    return extra


class MultipleChoiceVerifier(Verifier[MultipleChoiceOptions]):
    name = "multiple_choice"
    description = "Extract the chosen letter from free text and compare it with the reference letter."
    Options = MultipleChoiceOptions
    inline_max_chars = 20_000  # fixed patterns without nested quantifiers: linear scans

    def check(self, response: str, reference: Any, options: MultipleChoiceOptions) -> Verdict:
        choices = options.choices.upper()
        ref = str(reference).strip().strip("()").upper() if isinstance(reference, str) else ""
        if len(ref) != 1 or ref not in choices:
            raise InvalidReference(f"reference must be one of the letters {choices}")
        for method, pattern in _MC_PATTERNS:
            flags = re.MULTILINE | (re.IGNORECASE if method in ("answer_is", "option_is") else 0)
            found = [m.group("x").upper() for m in re.finditer(pattern, response, flags)]
            found = [f for f in found if f in choices]
            if not found:
                continue
            if method in ("parenthesised", "bare"):
                found = found[-1:]  # a parenthesised letter in reasoning is only the last one's claim
            else:
                found += _alternatives(response, pattern, flags, choices)
            distinct = sorted(set(found))
            if len(distinct) > 1:
                return Verdict.rejected(
                    f"several different choices stated: {', '.join(distinct)}", extracted=distinct, method=method
                )
            letter = distinct[0]
            score = 1.0 if letter == ref else 0.0
            return Verdict.ok(score, f"chose {letter}", extracted=letter, method=method)
        return Verdict.no_answer("no choice letter found")


VERIFIERS: list[Verifier[Any]] = [ExactMatchVerifier(), RegexMatchVerifier(), MultipleChoiceVerifier()]
