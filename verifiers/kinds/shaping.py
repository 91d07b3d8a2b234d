"""Shaping terms trainers add beside correctness: format, length, JSON validity, repetition.

Format and JSON checks are binary verdicts; length and repetition are penalties in [-1, 0] (``binary = False``),
meant to be summed into a reward spec with a weight.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from functools import lru_cache
from typing import Any, Literal

import jsonschema
from pydantic import Field, model_validator

from verifiers.base import BaseOptions, Verifier
from verifiers.context import process_setting
from verifiers.types import InvalidReference, Verdict

# ---------------------------------------------------------------- format

_THINK = re.compile(r"\s*<think>(?P<think>.*?)</think>(?P<rest>.*)", re.DOTALL)
_ANSWER = re.compile(r"\s*<answer>(?P<answer>.*?)</answer>\s*", re.DOTALL)


class FormatOptions(BaseOptions):
    template: Literal["think", "think_answer", "boxed"] | None = Field(
        None,
        description="think: <think>…</think> then a non-empty answer; think_answer: <think>…</think>"
        "<answer>…</answer> and nothing else; boxed: a \\boxed{…} final answer.",
    )
    regex: str | None = Field(None, description="Python pattern the whole response must match (DOTALL).")

    @model_validator(mode="after")
    def _one_rule(self) -> FormatOptions:
        if (self.template is None) == (self.regex is None):
            raise ValueError("give exactly one of 'template' or 'regex'")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return self


def _check_template(response: str, template: str) -> tuple[bool, str]:
    if template == "boxed":
        return ("\\boxed{" in response, "has a \\boxed{} answer" if "\\boxed{" in response else "no \\boxed{} answer")
    m = _THINK.fullmatch(response)
    if m is None:
        return False, "does not start with one <think>…</think> block"
    if "<think>" in m.group("think") or "<think>" in m.group("rest") or "</think>" in m.group("rest"):
        return False, "more than one <think> block"
    if not m.group("think").strip():
        return False, "empty <think> block"
    rest = m.group("rest")
    if template == "think":
        return (bool(rest.strip()), "answer follows the reasoning" if rest.strip() else "no answer after </think>")
    a = _ANSWER.fullmatch(rest)
    if a is None:
        return False, "expected exactly <answer>…</answer> after </think>"
    if not a.group("answer").strip():
        return False, "empty <answer> block"
    return True, "think/answer template followed"


class FormatVerifier(Verifier[FormatOptions]):
    name = "format"
    description = "The response follows a required template (<think>…</think> then an answer) or a regex."
    Options = FormatOptions
    inline_max_chars = 20_000

    def inline_ok(self, options: FormatOptions) -> bool:
        return options.regex is None  # a caller's regex may backtrack: pool only

    def check(self, response: str, reference: Any, options: FormatOptions) -> Verdict:
        if options.regex is not None:
            ok = re.fullmatch(options.regex, response, re.DOTALL) is not None
            reason = "matches the format pattern" if ok else "does not match the format pattern"
        else:
            ok, reason = _check_template(response, options.template or "think")
        return Verdict.ok(1.0 if ok else 0.0, reason)


# ---------------------------------------------------------------- length


class LengthOptions(BaseOptions):
    mode: Literal["dapo", "linear", "cosine"] = Field(
        "dapo", description="dapo: soft overlong punishment; linear/cosine: penalty rising from start to max."
    )
    max_length: int = Field(..., gt=0, description="L_max: at and beyond it the penalty is -1.")
    cache_length: int = Field(0, ge=0, description="dapo: L_cache, the soft zone before L_max.")
    start_length: int = Field(0, ge=0, description="linear/cosine: no penalty up to this length.")
    unit: Literal["chars", "words", "tokens"] = "chars"
    tokenizer: str | None = Field(None, description="unit=tokens: name of a tokenizer configured on the server.")

    @model_validator(mode="after")
    def _consistent(self) -> LengthOptions:
        if self.mode == "dapo" and self.cache_length > self.max_length:
            raise ValueError("cache_length must not exceed max_length")
        if self.mode != "dapo" and self.start_length >= self.max_length:
            raise ValueError("start_length must be below max_length")
        if self.unit == "tokens" and not self.tokenizer:
            raise ValueError("unit=tokens needs a tokenizer name")
        return self


def dapo_overlong_penalty(length: int, max_length: int, cache_length: int) -> float:
    """DAPO soft overlong punishment: 0 up to L_max − L_cache, linear to −1 at L_max, −1 beyond."""
    soft_start = max_length - cache_length
    if length <= soft_start:
        return 0.0
    if length >= max_length or cache_length == 0:
        return -1.0
    return (soft_start - length) / cache_length


def ramp_penalty(length: int, start: int, max_length: int, shape: str) -> float:
    x = min(max((length - start) / (max_length - start), 0.0), 1.0)
    return -x if shape == "linear" else -(1.0 - math.cos(math.pi * x)) / 2.0


def configured_tokenizers() -> dict[str, str]:
    """Tokenizer name → local path: what this process was configured with (a worker, from its WorkerConfig), else
    (library use outside a worker pool) the ``REWARD_SERVICE_LENGTH_TOKENIZERS`` environment variable as JSON."""
    configured = process_setting("length_tokenizers")
    if configured:
        return dict(configured)
    raw = os.environ.get("REWARD_SERVICE_LENGTH_TOKENIZERS", "")
    return json.loads(raw) if raw else {}


@lru_cache(maxsize=8)
def _load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def measure(response: str, unit: str, tokenizer: str | None) -> int:
    if unit == "chars":
        return len(response)
    if unit == "words":
        return len(response.split())
    paths = configured_tokenizers()
    if tokenizer not in paths:
        raise InvalidReference(f"tokenizer {tokenizer!r} is not configured on this server (known: {sorted(paths)})")
    return len(_load_tokenizer(paths[tokenizer])(response, add_special_tokens=False)["input_ids"])


class LengthVerifier(Verifier[LengthOptions]):
    name = "length"
    description = "Length penalty in [-1, 0]: DAPO soft overlong punishment, or a linear / cosine ramp."
    Options = LengthOptions
    binary = False
    inline_max_chars = 100_000

    def inline_ok(self, options: LengthOptions) -> bool:
        return options.unit != "tokens"  # tokenizers live in the workers

    def warm_up(self) -> None:
        for path in configured_tokenizers().values():
            _load_tokenizer(path)

    def check(self, response: str, reference: Any, options: LengthOptions) -> Verdict:
        n = measure(response, options.unit, options.tokenizer)
        if options.mode == "dapo":
            score = dapo_overlong_penalty(n, options.max_length, options.cache_length)
        else:
            score = ramp_penalty(n, options.start_length, options.max_length, options.mode)
        return Verdict.ok(score, f"{n} {options.unit}", length=n, unit=options.unit)


# ---------------------------------------------------------------- JSON schema

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


class JsonSchemaOptions(BaseOptions):
    schema_: dict[str, Any] | None = Field(
        None, alias="schema", description="JSON schema; when absent the reference is the schema."
    )
    allow_fence: bool = Field(True, description="Accept the JSON inside a ```json fenced block.")


class JsonSchemaVerifier(Verifier[JsonSchemaOptions]):
    name = "json_schema"
    description = "The response is valid JSON and (when a schema is given) valid against it."
    Options = JsonSchemaOptions

    def check(self, response: str, reference: Any, options: JsonSchemaOptions) -> Verdict:
        schema = options.schema_ if options.schema_ is not None else reference
        if schema is not None:
            if not isinstance(schema, dict):
                raise InvalidReference("the JSON schema must be an object")
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise InvalidReference(f"invalid JSON schema: {exc.message}") from None
        text = response.strip()
        fence = _FENCE.findall(response) if options.allow_fence else []
        if fence:
            text = fence[-1].strip()
        if not text:
            return Verdict.no_answer("empty response")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return Verdict.ok(
                0.0, f"not valid JSON: {exc.msg} at line {exc.lineno}", source="fence" if fence else "text")
        if schema is None:
            return Verdict.ok(1.0, "valid JSON")
        errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(value), key=lambda e: e.path)
        if errors:
            return Verdict.ok(0.0, f"schema violation: {errors[0].message[:200]}",
                              errors=[e.message[:200] for e in errors[:10]])
        return Verdict.ok(1.0, "valid against the schema")


# ---------------------------------------------------------------- repetition


class RepetitionOptions(BaseOptions):
    n: int = Field(3, ge=1, le=20, description="n-gram size.")
    unit: Literal["words", "chars"] = "words"
    max_penalty: float = Field(1.0, gt=0, le=1, description="Penalty when every n-gram is a repeat.")
    min_ngrams: int = Field(1, ge=1, description="Fewer n-grams than this: no penalty.")


def repeated_fraction(tokens: list[str], n: int) -> tuple[float, int]:
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    if not grams:
        return 0.0, 0
    counts = Counter(grams)
    return 1.0 - len(counts) / len(grams), len(grams)


class RepetitionVerifier(Verifier[RepetitionOptions]):
    name = "repetition"
    description = "N-gram repetition penalty in [-max_penalty, 0]: minus the share of n-grams that are repeats."
    Options = RepetitionOptions
    binary = False
    inline_max_chars = 20_000

    def check(self, response: str, reference: Any, options: RepetitionOptions) -> Verdict:
        tokens = response.split() if options.unit == "words" else list(response)
        frac, total = repeated_fraction(tokens, options.n)
        if total < options.min_ngrams:
            frac = 0.0
        return Verdict.ok(-options.max_penalty * frac, f"{frac:.1%} of {total} {options.n}-grams repeat",
                          repeated_fraction=frac, ngrams=total)


VERIFIERS: list[Verifier[Any]] = [FormatVerifier(), LengthVerifier(), JsonSchemaVerifier(), RepetitionVerifier()]
