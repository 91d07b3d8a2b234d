"""Result comparison under the rules text-to-SQL benchmarks define.

- ``spider`` (Spider's test-suite evaluation): rows as a bag (duplicates count); order counts only when the gold
  query orders its rows; the answer's columns may come in another order. A column order is tried only when each
  gold column and the answer column it maps to hold the same values (as a bag), which is necessary for the rows to
  match, so the permutations tried stay few on real results.
- ``set`` (BIRD): the set of rows, order and duplicates ignored, columns in order.
- ``ordered``: the same rows in the same order, columns in order.

Two results with no rows are equal whatever their columns (both benchmarks' rule). With ``float_tolerance``,
numbers match when ``math.isclose`` with that relative and absolute tolerance says so; rows are then paired after
sorting by their non-numeric values first, then their numbers.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

CompareMode = Literal["spider", "set", "ordered"]
Row = tuple[Any, ...]
MAX_PERMUTATIONS = 720  # 6! column orders; beyond it the first ones found are tried and the rest reported untried


@dataclass(frozen=True)
class Rule:
    mode: CompareMode
    order_matters: bool
    permute_columns: bool
    float_tolerance: float | None = None


@dataclass(frozen=True)
class Comparison:
    equal: bool
    reason: str
    column_order: tuple[int, ...] | None = None  # answer column for each gold column, when the rows matched
    permutations_capped: bool = False


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _close(a: Any, b: Any, tolerance: float | None) -> bool:
    if tolerance is not None and _number(a) and _number(b):
        return math.isclose(float(a), float(b), rel_tol=tolerance, abs_tol=tolerance)
    return bool(a == b)


def _rows_close(a: Sequence[Row], b: Sequence[Row], tolerance: float | None) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(_close(u, v, tolerance) for u, v in zip(x, y)) for x, y in zip(a, b))


_TYPE_RANK = {type(None): 0, str: 2, bytes: 3}


def _pairing_key(row: Row) -> tuple[tuple[tuple[int, Any], ...], tuple[float, ...]]:
    others = tuple((_TYPE_RANK.get(type(v), 4), v if type(v) in _TYPE_RANK and v is not None else repr(v))
                   for v in row if not _number(v))
    return others, tuple(float(v) for v in row if _number(v))


def same_bag(a: Sequence[Row], b: Sequence[Row], tolerance: float | None) -> bool:
    if len(a) != len(b):
        return False
    if tolerance is None:
        return Counter(a) == Counter(b)
    return _rows_close(sorted(a, key=_pairing_key), sorted(b, key=_pairing_key), tolerance)


def _distinct(rows: Sequence[Row]) -> list[Row]:
    return list(dict.fromkeys(rows))


def _rows_equal(gold: Sequence[Row], answer: Sequence[Row], rule: Rule) -> bool:
    if rule.mode == "set":
        return same_bag(_distinct(gold), _distinct(answer), rule.float_tolerance)
    if rule.order_matters:
        return _rows_close(gold, answer, rule.float_tolerance)
    return same_bag(gold, answer, rule.float_tolerance)


def _column_orders(gold: Sequence[Row], answer: Sequence[Row], rule: Rule) -> Iterator[tuple[int, ...]]:
    """Answer column for each gold column, identity first; only orders whose every column pair holds the same
    values (a set of values under the set rule)."""
    width = len(gold[0])
    identity = tuple(range(width))
    yield identity
    if not rule.permute_columns or width < 2:
        return

    def column(rows: Sequence[Row], i: int) -> list[Row]:
        values = [(row[i],) for row in rows]
        return _distinct(values) if rule.mode == "set" else values

    gold_columns = [column(gold, i) for i in range(width)]
    answer_columns = [column(answer, j) for j in range(width)]
    candidates = [[j for j in range(width) if same_bag(gold_columns[i], answer_columns[j], rule.float_tolerance)]
                  for i in range(width)]
    chosen: list[int] = []

    def assign(i: int) -> Iterator[tuple[int, ...]]:
        if i == width:
            yield tuple(chosen)
            return
        for j in candidates[i]:
            if j not in chosen:
                chosen.append(j)
                yield from assign(i + 1)
                chosen.pop()

    for order in assign(0):
        if order != identity:
            yield order


def compare(gold: Sequence[Row], answer: Sequence[Row], rule: Rule) -> Comparison:
    """Whether the answer's rows are the gold rows under ``rule``, with the reason when they are not."""
    if not gold and not answer:
        return Comparison(True, "both results are empty")
    if rule.mode != "set" and len(gold) != len(answer):
        return Comparison(False, f"returned {len(answer)} rows, the gold query {len(gold)}")
    if not gold or not answer:
        return Comparison(False, f"returned {len(answer)} rows, the gold query {len(gold)}")
    if len(gold[0]) != len(answer[0]):
        return Comparison(False, f"returned {len(answer[0])} columns, the gold query {len(gold[0])}")
    tried = 0
    for order in _column_orders(gold, answer, rule):
        if tried == MAX_PERMUTATIONS:
            return Comparison(False, f"rows differ in the {tried} column orders tried", permutations_capped=True)
        tried += 1
        permuted = answer if order == tuple(range(len(order))) else [tuple(row[j] for j in order) for row in answer]
        if _rows_equal(gold, permuted, rule):
            return Comparison(True, "same rows" if tried == 1 else "same rows, columns in another order", order)
    if rule.order_matters and rule.mode != "set" and same_bag(gold, answer, rule.float_tolerance):
        return Comparison(False, "same rows in another order; the gold query orders its rows")
    return Comparison(False, "rows differ")
