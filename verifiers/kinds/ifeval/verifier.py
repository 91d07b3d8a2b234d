"""The ``ifeval`` verifier: which of a prompt's verifiable instructions a response follows."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.ifeval.catalog import Bound, Instruction, bind
from verifiers.kinds.ifeval.extra import EXTRA_INSTRUCTIONS
from verifiers.kinds.ifeval.instructions import IFEVAL_INSTRUCTIONS
from verifiers.kinds.ifeval.loose import loose_variants
from verifiers.kinds.ifeval.textstats import load_language_profiles
from verifiers.types import InvalidReference, Verdict

CATALOG: dict[str, Instruction] = {i.id: i for i in [*IFEVAL_INSTRUCTIONS, *EXTRA_INSTRUCTIONS]}


class IfEvalOptions(BaseOptions):
    mode: Literal["strict", "loose"] = Field(
        "strict", description="strict: the response as given; loose: also try IFEval's eight lenient variants."
    )


def parse_reference(reference: Any) -> list[Bound]:
    """``{"instruction_id_list": [...], "kwargs": [...]}`` exactly as in IFEval's input data."""
    if not isinstance(reference, dict) or "instruction_id_list" not in reference:
        raise InvalidReference('reference must be an object with "instruction_id_list" (and "kwargs")')
    ids = reference["instruction_id_list"]
    if not isinstance(ids, list) or not ids:
        raise InvalidReference("instruction_id_list must be a non-empty list of instruction ids")
    kwargs = reference.get("kwargs")
    if kwargs is None:
        kwargs = [{}] * len(ids)
    if not isinstance(kwargs, list) or len(kwargs) != len(ids):
        raise InvalidReference(f"kwargs must be a list with one object per instruction ({len(ids)})")
    return [bind(CATALOG, i, iid, kw) for i, (iid, kw) in enumerate(zip(ids, kwargs))]


def follow_list(response: str, bound: list[Bound], mode: str) -> list[bool]:
    """One verdict per instruction; a blank (variant of the) response follows nothing, as in the reference."""
    variants = loose_variants(response) if mode == "loose" else [response]
    variants = [v for v in dict.fromkeys(variants) if v.strip()]  # without "*" often equals the original
    return [any(b.followed(v) for v in variants) for b in bound]


class IfEvalVerifier(Verifier[IfEvalOptions]):
    name = "ifeval"
    version = "1"
    description = (
        "IFEval verifiable instructions (all 25 types, reference-checker semantics) plus JSON/schema, regex, "
        "character bounds, required sections and forbidden phrases. Score: fraction of instructions followed."
    )
    Options = IfEvalOptions
    binary = False
    default_timeout_s = 30.0  # generous: long responses in loose mode run eight variants through every check

    def warm_up(self) -> None:
        load_language_profiles()

    def check(self, response: str, reference: Any, options: IfEvalOptions) -> Verdict:
        bound = parse_reference(reference)
        followed = follow_list(response, bound, options.mode)
        details = {
            "mode": options.mode,
            "instructions": [{"id": b.instruction.id, "followed": f} for b, f in zip(bound, followed)],
            "all_followed": all(followed),
        }
        if not response.strip():
            return Verdict.no_answer("empty response", **details)
        n = sum(followed)
        return Verdict.ok(n / len(bound), f"{n} of {len(bound)} instructions followed", **details)


VERIFIERS: list[Verifier[Any]] = [IfEvalVerifier()]
