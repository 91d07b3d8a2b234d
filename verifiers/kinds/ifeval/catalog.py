"""The instruction catalogue: id → kwargs schema + check, shared by IFEval's ids and our extra ones."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from verifiers.types import InvalidReference

Relation = Literal["less than", "at least"]


class Kwargs(BaseModel):
    """Base of every instruction's kwargs: unknown keys are a bad reference, not something to ignore."""

    model_config = ConfigDict(extra="forbid")


class NoKwargs(Kwargs):
    pass


def compare(count: int, relation: Relation, target: int) -> bool:
    """IFEval's two relations: "less than" is strict, "at least" is inclusive."""
    return count < target if relation == "less than" else count >= target


@dataclass(frozen=True)
class Instruction:
    id: str
    kwargs: type[BaseModel]
    check: Callable[[str, Any], bool]  # (response, validated kwargs) -> followed
    description: str


@dataclass(frozen=True)
class Bound:
    """An instruction with its validated kwargs, ready to check any variant of a response."""

    instruction: Instruction
    kwargs: BaseModel

    def followed(self, response: str) -> bool:
        return self.instruction.check(response, self.kwargs)


def bind(catalog: Mapping[str, Instruction], index: int, instruction_id: Any, raw_kwargs: Any) -> Bound:
    """Validate one (id, kwargs) pair of a reference; anything wrong names the id and its position."""
    if not isinstance(instruction_id, str) or instruction_id not in catalog:
        raise InvalidReference(f"instruction {index}: unknown instruction id {instruction_id!r}")
    if raw_kwargs is None:
        raw_kwargs = {}
    if not isinstance(raw_kwargs, dict):
        raise InvalidReference(f"instruction {index} ({instruction_id}): kwargs must be an object")
    instruction = catalog[instruction_id]
    # IFEval copies on the Hub fill every kwarg any instruction uses with null: unused nulls are not an error.
    present = {k: v for k, v in raw_kwargs.items() if v is not None}
    try:
        kwargs = instruction.kwargs.model_validate(present)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'kwargs'}: {e['msg']}" for e in exc.errors()[:4])
        raise InvalidReference(f"instruction {index} ({instruction_id}): bad kwargs: {problems}") from None
    return Bound(instruction, kwargs)
