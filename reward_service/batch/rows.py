"""Rows in, rows out: how one rollout row becomes a verify item, and how its verdict is written back.

These functions hold no I/O and no event loop, so the same row scoring runs in the CLI, against a server, or inside
a Ray Data ``map_batches`` (``score_batch`` with any function that verifies a list of items).
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

# The columns a scored row gains. An input column of the same name is overwritten.
RESULT_FIELDS = ("score", "status", "reason", "details", "turn_scores")

Item = dict[str, Any]  # verifier, response or messages (+ tools), reference, options, id: the /v1/verify item shape
Result = dict[str, Any]  # score, status, reason, details: the verdict shape
VerifyBatch = Callable[[list[Item]], list[Result]]
AsyncVerifyBatch = Callable[[list[Item]], Awaitable[list[Result]]]


@dataclass(frozen=True)
class RowSpec:
    """Which fields of a row hold what. Exactly one of ``verifier`` and ``verifier_field`` is set."""

    response_field: str = "response"
    reference_field: str = "reference"
    id_field: str = "id"
    verifier: str | None = None
    verifier_field: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    group_field: str | None = None  # rows sharing this value form one group (``consensus`` votes within it)
    # A row without a response that holds a trajectory here (OpenAI chat messages) is scored as one; None: only
    # responses. The tool specs of ``tools_field``, when present, go with either.
    messages_field: str | None = "messages"
    tools_field: str = "tools"

    def __post_init__(self) -> None:
        if (self.verifier is None) == (self.verifier_field is None):
            raise ValueError("give exactly one of --verifier or --verifier-field")


class UnreadableRow(dict[str, Any]):
    """An input record that could not be read as a row; it still gets an output row, carrying the problem."""

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem


def error_result(reason: str) -> Result:
    """A row that could not even be sent (no response, no verifier): a named error, never a 0."""
    return {"score": None, "status": "error", "reason": reason, "details": {}}


def row_key(value: Any) -> Any:
    """A hashable resume key for an id value (ids may be numbers, strings, or anything JSON can hold)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return json.dumps(value, sort_keys=True, default=str)


def with_id(row: dict[str, Any], index: int, spec: RowSpec) -> dict[str, Any]:
    """Rows without an id get their 0-based position in the input as id, so a restart can recognise them."""
    if row.get(spec.id_field) is None:
        if isinstance(row, UnreadableRow):
            row[spec.id_field] = index
        else:
            row = {**row, spec.id_field: index}
    return row


def to_item(row: dict[str, Any], spec: RowSpec) -> Item | str:
    """The verify item for a row, or the reason there cannot be one."""
    if isinstance(row, UnreadableRow):
        return row.problem
    response = row.get(spec.response_field)
    messages = row.get(spec.messages_field) if spec.messages_field else None
    if response is not None and messages is not None:
        return (f"the row has both a response ({spec.response_field!r}) and messages ({spec.messages_field!r}); "
                "give one")
    if messages is None and not isinstance(response, str):
        what = "missing" if response is None else f"a {type(response).__name__}, not a string"
        also = f" (and there is no {spec.messages_field!r})" if spec.messages_field else ""
        return f"field {spec.response_field!r} is {what}{also}"
    verifier = spec.verifier if spec.verifier is not None else row.get(spec.verifier_field or "")
    if not isinstance(verifier, str) or not verifier:
        return f"field {spec.verifier_field!r} does not name a verifier"
    item = {"verifier": verifier, "reference": row.get(spec.reference_field),
            "options": spec.options, "id": str(row.get(spec.id_field))}
    if messages is None:
        item["response"] = response
    else:
        item["messages"] = messages
    if row.get(spec.tools_field) is not None:  # with a response too: the calls are read from its text
        item["tools"] = row[spec.tools_field]
    if spec.group_field is not None and row.get(spec.group_field) is not None:
        item["group"] = str(row[spec.group_field])
    return item


def group_chunks(rows: Iterable[dict[str, Any]], size: int, group_field: str | None) -> Iterator[list[dict[str, Any]]]:
    """Chunks of about ``size`` rows that never cut a run of consecutive rows of one group (a group is scored
    within one request, so all its rows must travel together; rows of a group must therefore be adjacent)."""
    chunk: list[dict[str, Any]] = []
    for row in rows:
        if len(chunk) >= size and (group_field is None or row.get(group_field) is None
                                   or row.get(group_field) != chunk[-1].get(group_field)):
            yield chunk
            chunk = []
        chunk.append(row)
    if chunk:
        yield chunk


def merge(row: dict[str, Any], result: Result) -> dict[str, Any]:
    return {**row, **{k: result.get(k) for k in RESULT_FIELDS}}


def plan(rows: list[dict[str, Any]], spec: RowSpec) -> tuple[list[dict[str, Any] | None], list[int], list[Item]]:
    """Output slots already filled for unsendable rows, and the (position, item) pairs still to verify."""
    out: list[dict[str, Any] | None] = [None] * len(rows)
    positions: list[int] = []
    items: list[Item] = []
    for k, row in enumerate(rows):
        item = to_item(row, spec)
        if isinstance(item, str):
            out[k] = merge(row, error_result(item))
        else:
            positions.append(k)
            items.append(item)
    return out, positions, items


T = TypeVar("T")


def complete(values: list[T | None], what: str) -> list[T]:
    """``values`` once every slot is filled: a slot left empty is a bug that must not become a missing output row."""
    missing = [i for i, v in enumerate(values) if v is None]
    if missing:
        raise RuntimeError(f"{len(missing)} {what} left without a result (first at {missing[0]})")
    return [v for v in values if v is not None]


def fill(rows: list[dict[str, Any]], out: list[dict[str, Any] | None], positions: list[int],
         results: list[Result]) -> list[dict[str, Any]]:
    if len(results) != len(positions):
        raise RuntimeError(f"verifier returned {len(results)} results for {len(positions)} items")
    for k, result in zip(positions, results):
        out[k] = merge(rows[k], result)
    return complete(out, "rows")


def score_batch(rows: list[dict[str, Any]], spec: RowSpec, verify: VerifyBatch) -> list[dict[str, Any]]:
    """Score rows with a blocking verify function (e.g. ``RewardClient.verify`` wrapped to dicts); order kept."""
    out, positions, items = plan(rows, spec)
    return fill(rows, out, positions, verify(items) if items else [])


async def ascore_batch(rows: list[dict[str, Any]], spec: RowSpec, verify: AsyncVerifyBatch) -> list[dict[str, Any]]:
    """The same with an async verify function (the CLI's embedded engine or async client)."""
    out, positions, items = plan(rows, spec)
    return fill(rows, out, positions, await verify(items) if items else [])
