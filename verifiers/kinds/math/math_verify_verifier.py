"""The ``math_verify`` verifier: Hugging Face Math-Verify's own ``parse`` + ``verify`` with its defaults.

It exists as a reference point beside ``math`` (same data, another grader: ``reward-service audit diff``) and for
trainers that want Math-Verify's exact semantics. Math-Verify bounds its own time with ``signal.alarm``, which only
works on a main thread and cannot stop C code; here both of its timeouts are off and the worker pool's deadline
(kill and replace the worker) bounds the time instead.
"""
from __future__ import annotations

import functools
import logging
import re
from typing import Any

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.math.verifier import reference_texts
from verifiers.types import InvalidReference, Verdict

_DETAIL_CHARS = 300
# A gold that carries its own math delimiters is parsed as written; ``\$`` is a dollar sign, not a delimiter.
_DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed")


class _DropTimeoutDisabled(logging.Filter):
    """Math-Verify warns that its timeout is disabled; here that is the design (the pool's deadline), not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropTimeoutDisabled())


class MathVerifyOptions(BaseOptions):
    float_rounding: int = Field(6, ge=0, le=50, description="Decimal places floats are rounded to (Math-Verify).")
    numeric_precision: int = Field(15, ge=1, le=1000, description="Significant digits of numeric comparisons.")
    strict: bool = Field(
        True, description="Strict mode: variables matter and sets do not compare with tuples (Math-Verify)."
    )


@functools.lru_cache(maxsize=4096)
def parse_gold(text: str) -> tuple[Any, ...]:
    """A gold as Math-Verify's README parses it: inside ``$…$`` unless it already carries its own delimiters.
    Cached per worker (a GRPO group sends the same gold with every rollout); raises ``InvalidReference`` when
    Math-Verify finds nothing in it, since a gold that cannot be read must never reward."""
    from math_verify import parse

    source = text if _DELIMITED.search(text) else f"${text}$"
    parsed = parse(source, parsing_timeout=None)
    if not parsed:
        raise InvalidReference(f"Math-Verify finds no answer in the reference {text[:80]!r}")
    return tuple(parsed)


def _string_form(parsed: list[Any] | tuple[Any, ...]) -> str:
    """The text Math-Verify matched (its second element), else the parsed value."""
    return str(parsed[1] if len(parsed) > 1 else parsed[0])[:_DETAIL_CHARS]


class MathVerifyVerifier(Verifier[MathVerifyOptions]):
    name = "math_verify"
    version = "1"
    description = (
        "Math-Verify's parse + verify with its defaults (any gold in a list may match), timed by the worker pool "
        "instead of signal.alarm."
    )
    Options = MathVerifyOptions

    def warm_up(self) -> None:
        parse_gold("1")  # imports math_verify and latex2sympy once per worker, before the first deadline runs

    def check(self, response: str, reference: Any, options: MathVerifyOptions) -> Verdict:
        from math_verify import parse, verify

        golds = [parse_gold(t) for t in reference_texts(reference)]
        gold_parsed = [_string_form(g) for g in golds]
        details: dict[str, Any] = {"gold_parsed": gold_parsed[0] if len(gold_parsed) == 1 else gold_parsed}
        pred = parse(response or "", parsing_timeout=None)
        if not pred:
            return Verdict.no_answer("Math-Verify extracts no answer from the response", **details)
        details["extracted"] = _string_form(pred)
        equal = any(
            verify(list(g), pred, float_rounding=options.float_rounding, numeric_precision=options.numeric_precision,
                   strict=options.strict, timeout_seconds=None)
            for g in golds
        )
        return Verdict.ok(1.0 if equal else 0.0, "equivalent to the reference" if equal else
                          "not equivalent to the reference", **details)


VERIFIERS: list[Verifier[Any]] = [MathVerifyVerifier()]
