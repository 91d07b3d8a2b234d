"""Constraints beyond IFEval that trainers ask for: JSON (optionally against a schema), regexes, character bounds,
required sections and forbidden phrases. Same contract as the IFEval ones (see docs/ifeval.md)."""
from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from pydantic import Field, field_validator, model_validator

from verifiers.kinds.ifeval.catalog import Instruction, Kwargs
from verifiers.kinds.ifeval.instructions import strip_code_fence


class JsonKwargs(Kwargs):
    schema_: dict[str, Any] | bool | None = Field(default=None, alias="schema")

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, schema: Any) -> Any:
        if schema is not None:
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON schema: {exc.message}") from None
        return schema


def valid_json(text: str, kw: JsonKwargs) -> bool:
    """The whole answer (a code fence around it allowed) parses as JSON and, if given, satisfies the schema."""
    try:
        value = json.loads(strip_code_fence(text))
    except ValueError:
        return False
    if kw.schema_ is None:
        return True
    validator = jsonschema.validators.validator_for(kw.schema_)(kw.schema_)
    return bool(validator.is_valid(value))


_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


class RegexKwargs(Kwargs):
    pattern: str = Field(min_length=1)
    flags: str = Field("", pattern=r"^[imsx]*$", description="Any of i (ignore case), m, s, x.")

    @model_validator(mode="after")
    def _compiles(self) -> RegexKwargs:
        try:
            self.compiled()
        except re.error as exc:
            raise ValueError(f"pattern is not a valid regular expression: {exc}") from None
        return self

    def compiled(self) -> re.Pattern[str]:
        flags = 0
        for letter in self.flags:
            flags |= _FLAGS[letter]
        return re.compile(self.pattern, flags)


def regex_must_match(text: str, kw: RegexKwargs) -> bool:
    return kw.compiled().search(text) is not None


def regex_must_not_match(text: str, kw: RegexKwargs) -> bool:
    return kw.compiled().search(text) is None


class CharsKwargs(Kwargs):
    num_chars: int = Field(ge=0)


def min_characters(text: str, kw: CharsKwargs) -> bool:
    """Characters of the answer without surrounding whitespace, at least num_chars."""
    return len(text.strip()) >= kw.num_chars


def max_characters(text: str, kw: CharsKwargs) -> bool:
    return len(text.strip()) <= kw.num_chars


class SectionsKwargs(Kwargs):
    sections: list[str] = Field(min_length=1)
    in_order: bool = False

    @field_validator("sections")
    @classmethod
    def _non_blank(cls, names: list[str]) -> list[str]:
        if any(not n.strip() for n in names):
            raise ValueError("section names must not be blank")
        return names


_MARKS = "*_ \t"


def _heading_position(text: str, name: str) -> int | None:
    """Start of the first line that heads a section called ``name``: ``# Name``, ``**Name**``, ``Name:`` and the
    like (case-insensitive, optionally numbered); a line that merely starts with the word does not count."""
    words = r"\s+".join(map(re.escape, name.split()))
    line = re.compile(
        rf"^[ \t]*(?:#{{1,6}}[ \t]*)?(?:[*_]{{1,2}}[ \t]*)?(?:\d+[.)][ \t]*)?{words}(?P<rest>[^\n]*)$",
        re.IGNORECASE | re.MULTILINE,
    )
    for m in line.finditer(text):
        rest = m.group("rest").lstrip(_MARKS)
        if not rest or rest.startswith(":"):
            return m.start()
    return None


def required_sections(text: str, kw: SectionsKwargs) -> bool:
    positions = [_heading_position(text, name) for name in kw.sections]
    found = [p for p in positions if p is not None]
    if len(found) < len(positions):
        return False
    return not kw.in_order or found == sorted(found)


class PhrasesKwargs(Kwargs):
    phrases: list[str] = Field(min_length=1)

    @field_validator("phrases")
    @classmethod
    def _non_blank(cls, phrases: list[str]) -> list[str]:
        if any(not p.strip() for p in phrases):
            raise ValueError("phrases must not be blank")
        return phrases


def forbidden_phrases(text: str, kw: PhrasesKwargs) -> bool:
    """None of the phrases occurs, ignoring case and how words are spaced, and only as whole words."""
    for phrase in kw.phrases:
        body = r"\s+".join(map(re.escape, phrase.split()))
        if re.search(rf"(?<!\w){body}(?!\w)", text, flags=re.IGNORECASE):
            return False
    return True


EXTRA_INSTRUCTIONS: list[Instruction] = [
    Instruction("detectable_format:valid_json", JsonKwargs, valid_json,
                "The answer is JSON; with kwargs.schema it must also validate against that JSON schema."),
    Instruction("regex:must_match", RegexKwargs, regex_must_match, "The regex (Python syntax) matches somewhere."),
    Instruction("regex:must_not_match", RegexKwargs, regex_must_not_match, "The regex matches nowhere."),
    Instruction("length_constraints:min_characters", CharsKwargs, min_characters,
                "At least num_chars characters (surrounding whitespace not counted)."),
    Instruction("length_constraints:max_characters", CharsKwargs, max_characters,
                "At most num_chars characters (surrounding whitespace not counted)."),
    Instruction("detectable_format:required_sections", SectionsKwargs, required_sections,
                "Each named section has a heading line (# Name, **Name**, Name:), optionally in order."),
    Instruction("keywords:forbidden_phrases", PhrasesKwargs, forbidden_phrases,
                "None of the phrases occurs (case-insensitive, whole words, any spacing)."),
]
