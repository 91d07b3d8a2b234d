"""Reward specs: several verifiers combined into one reward, with every component's score kept (a vector a
trainer can normalise per component, MARBLE-style) and gates that multiply (no format, no reward).

total = (Π gate scores) × Σ weight·score over the other components (divided by Σ weight when ``normalize``).
A component whose verdict has a null score makes the total null unless its ``on_null`` says otherwise: an
infrastructure failure must never quietly become part of a reward.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verifiers.base import Verifier, VerifierLookup
from verifiers.context import Context
from verifiers.conversation import inherit
from verifiers.options import BaseOptions
from verifiers.types import Status, Verdict, VerifyItem


class Component(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1)
    verifier: str = Field(..., min_length=1)
    weight: float = 1.0
    options: dict[str, Any] = Field(default_factory=dict)
    gate: bool = Field(False, description="Multiply the total by this component's score instead of adding it.")
    reference_key: str | None = Field(
        None, description="Take reference[key] when the item's reference is an object (e.g. 'answer')."
    )
    use_reference: bool = Field(True, description="False: the component gets no reference (format checks).")
    on_null: Literal["null", "zero", "skip"] = Field(
        "null", description="What a null component score does: null the total, count as 0, or leave it out."
    )


class SpecOptions(BaseOptions):
    components: list[Component] = Field(..., min_length=1)
    normalize: bool = Field(False, description="Divide the weighted sum by the sum of the non-gate weights.")

    @model_validator(mode="after")
    def _unique(self) -> SpecOptions:
        names = [c.name for c in self.components]
        if len(set(names)) != len(names):
            raise ValueError("component names must be unique")
        if any(c.verifier == "spec" or c.verifier.startswith("spec:") for c in self.components):
            raise ValueError("a spec cannot contain another spec")
        return self


def component_reference(reference: Any, c: Component) -> Any:
    if not c.use_reference:
        return None
    if c.reference_key is not None and isinstance(reference, dict):
        return reference.get(c.reference_key)
    return reference


def combine(components: list[Component], verdicts: list[Verdict], normalize: bool) -> Verdict:
    table: dict[str, dict[str, Any]] = {}
    total = 0.0
    weight_sum = 0.0
    gate = 1.0
    nulled: list[str] = []
    for c, v in zip(components, verdicts):
        table[c.name] = {
            "score": v.score, "status": v.status.value, "reason": v.reason, "weight": c.weight, "gate": c.gate,
            "verifier": c.verifier,
        }
        score = v.score
        if score is None:
            if c.on_null == "null":
                nulled.append(c.name)
                continue
            if c.on_null == "skip":
                continue
            score = 0.0
        if c.gate:
            gate *= score
        else:
            total += c.weight * score
            weight_sum += c.weight
    if nulled:
        first = table[nulled[0]]
        return Verdict(
            Status(first["status"]), None,
            f"component {nulled[0]!r} has no score ({first['status']}: {first['reason']})",
            {"components": table},
        )
    if normalize and weight_sum:
        total /= weight_sum
    value = gate * total
    reason = "gated out" if gate == 0.0 else "combined"
    return Verdict.ok(value, reason, components=table, gate=gate)


def validate_components(spec: SpecOptions, registry: VerifierLookup) -> None:
    """Unknown component verifiers or bad component options are caught before anything runs."""
    for c in spec.components:
        verifier = registry.get(c.verifier)
        verifier.validate(verifier.parse_options(c.options), registry)


async def run_spec(options: SpecOptions, response: str, reference: Any, ctx: Context) -> Verdict:
    items = [
        inherit(VerifyItem(verifier=c.verifier, response=response, reference=component_reference(reference, c),
                           options=c.options))
        for c in options.components
    ]
    verdicts = await ctx.verify_many(items)  # nested: cheap components inline, the rest concurrently
    return combine(options.components, verdicts, options.normalize)


class SpecVerifier(Verifier[SpecOptions]):
    name = "spec"
    description = ("Inline reward spec: options.components combine verifiers into one reward "
                   "with a per-component vector.")
    Options = SpecOptions
    execution = "async"
    binary = False
    # Components enforce their own deadlines; the spec's own only bounds the whole (capped by the server maximum).
    default_timeout_s = 300.0

    def validate(self, options: SpecOptions, lookup: VerifierLookup) -> None:
        validate_components(options, lookup)

    async def acheck(self, response: str, reference: Any, options: SpecOptions, ctx: Context) -> Verdict:
        return await run_spec(options, response, reference, ctx)


class NamedSpecOptions(BaseOptions):
    pass


class NamedSpecVerifier(Verifier[NamedSpecOptions]):
    """A spec named in settings, registered as ``spec:NAME`` so it works wherever a verifier name does."""

    Options = NamedSpecOptions
    execution = "async"
    binary = False
    default_timeout_s = 300.0

    def __init__(self, spec_name: str, spec: SpecOptions) -> None:
        self.name = f"spec:{spec_name}"
        self.description = f"Reward spec {spec_name!r}: " + ", ".join(
            f"{c.name}={c.verifier}{' (gate)' if c.gate else f' x{c.weight:g}'}" for c in spec.components
        )
        self.spec = spec

    def validate(self, options: NamedSpecOptions, lookup: VerifierLookup) -> None:
        validate_components(self.spec, lookup)

    async def acheck(self, response: str, reference: Any, options: NamedSpecOptions, ctx: Context) -> Verdict:
        return await run_spec(self.spec, response, reference, ctx)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "components": [c.model_dump() for c in self.spec.components]}


def named_specs(specs: dict[str, Any]) -> list[NamedSpecVerifier]:
    return [NamedSpecVerifier(name, SpecOptions.model_validate(
        body if isinstance(body, dict) else {"components": body})) for name, body in specs.items()]


VERIFIERS: list[Verifier[Any]] = [SpecVerifier()]
