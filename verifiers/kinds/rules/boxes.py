"""Boxes and points as vision-language models write them, brought to the reference's pixel frame.

Formats read, in this order (the first that finds any box wins, so a reasoning format cannot add to a JSON answer):
- Qwen2-VL box tokens ``<|box_start|>(x1,y1),(x2,y2)<|box_end|>`` and Qwen-VL / InternVL ``<box>...</box>`` tags;
- JSON or Python-literal values: ``{"bbox_2d": [...]}`` (Qwen2.5-VL), ``{"bbox"|"box"|"bounding_box": [...]}``,
  ``{"x1":..,"y1":..,"x2":..,"y2":..}``, a bare ``[x1, y1, x2, y2]`` or a list of any of these;
- text pairs ``(x1, y1), (x2, y2)`` and four-number brackets ``[x1, y1, x2, y2]`` in prose.
Coordinates are in the convention the caller names (``pixel``, ``0-1`` or the ``0-1000`` grid of Qwen2-VL-style
models) and are scaled to the reference image's pixels before any metric.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from verifiers.kinds.rules.answer import NUMBER, SP, structured_values

Coords = Literal["pixel", "0-1", "0-1000"]
Box = tuple[float, float, float, float]

_N = rf"{SP}({NUMBER}){SP}"
_PAIR_PAIR = re.compile(rf"\({_N},{_N}\){SP},?{SP}(?:to{SP})?\({_N},{_N}\)")
_FOUR = re.compile(rf"\[{_N},{_N},{_N},{_N}\]")
_TAGGED = re.compile(r"<\|box_start\|>(.{0,400}?)<\|box_end\|>|<box>(.{0,400}?)</box>",
                     re.DOTALL | re.IGNORECASE)
_BOX_KEYS = ("bbox_2d", "bbox", "box", "bounding_box", "box_2d", "coordinates")
_POINT = re.compile(rf"\({_N},{_N}\)|\[{_N},{_N}\]")
_POINT_KEYS = ("point_2d", "point", "coordinate", "coordinates", "click", "position")
MAX_BOXES_READ = 1000


@dataclass(frozen=True)
class Labelled:
    box: Box
    label: str | None = None
    score: float | None = None


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            out = float(value.strip())
        except ValueError:
            return None
        return out if math.isfinite(out) else None
    return None


def _four(value: Any) -> Box | None:
    if isinstance(value, (list, tuple)):
        if len(value) == 4:
            nums = [_num(v) for v in value]
            if all(n is not None for n in nums):
                return (nums[0], nums[1], nums[2], nums[3])  # type: ignore[return-value]
        if len(value) == 2 and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
            return _four([value[0][0], value[0][1], value[1][0], value[1][1]])
    if isinstance(value, dict) and all(k in value for k in ("x1", "y1", "x2", "y2")):
        return _four([value["x1"], value["y1"], value["x2"], value["y2"]])
    return None


def _from_value(value: Any, out: list[Labelled], depth: int = 0) -> None:
    if depth > 8 or len(out) >= MAX_BOXES_READ:
        return
    if isinstance(value, dict):
        for key in _BOX_KEYS:
            if key in value and (box := _four(value[key])) is not None:
                label = value.get("label", value.get("category", value.get("name")))
                out.append(Labelled(box, str(label) if label is not None else None,
                                    _num(value.get("score", value.get("confidence")))))
                return
        if (box := _four(value)) is not None:
            out.append(Labelled(box))
            return
        for inner in value.values():
            if isinstance(inner, (list, dict)):
                _from_value(inner, out, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        if (box := _four(value)) is not None:
            out.append(Labelled(box))
            return
        for inner in value:
            _from_value(inner, out, depth + 1)


def _from_text(text: str) -> list[Labelled]:
    found = [Labelled((float(m[0]), float(m[1]), float(m[2]), float(m[3]))) for m in _PAIR_PAIR.findall(text)]
    if not found:
        found = [Labelled((float(m[0]), float(m[1]), float(m[2]), float(m[3]))) for m in _FOUR.findall(text)]
    return found[:MAX_BOXES_READ]


def value_boxes(value: Any) -> list[Labelled]:
    """The boxes in one parsed JSON/literal value."""
    out: list[Labelled] = []
    _from_value(value, out)
    return out


def read_boxes(text: str) -> list[Labelled]:
    """Every box the answer states, in the order written (in the model's own coordinates)."""
    tagged = _TAGGED.findall(text)
    if tagged:
        out: list[Labelled] = []
        for a, b in tagged:
            inner = a or b
            values = structured_values(inner)
            before = len(out)
            for value in values:
                _from_value(value, out)
            if len(out) == before:
                out.extend(_from_text(inner))
        return out[:MAX_BOXES_READ]
    values = structured_values(text)
    out = []
    for value in values:
        _from_value(value, out)
    return out[:MAX_BOXES_READ] if out else _from_text(text)


def read_points(text: str) -> list[tuple[float, float]]:
    """Points stated as ``(x, y)``, ``[x, y]`` or under a point key; a box stands for its centre."""
    points: list[tuple[float, float]] = []
    for value in structured_values(text):
        _points_from_value(value, points)
    if points:
        return points
    boxes = read_boxes(text)
    if boxes:
        return [centre(b.box) for b in boxes]
    for m in _POINT.findall(text):
        nums = [float(v) for v in m if v]
        points.append((nums[0], nums[1]))
    return points


def _points_from_value(value: Any, out: list[tuple[float, float]], depth: int = 0) -> None:
    if depth > 8 or len(out) >= MAX_BOXES_READ:
        return
    if isinstance(value, dict):
        for key in _POINT_KEYS:
            if key in value:
                pt = _pair(value[key])
                if pt is not None:
                    out.append(pt)
                    return
        if "x" in value and "y" in value and (pt := _pair([value["x"], value["y"]])) is not None:
            out.append(pt)
            return
        for key in _BOX_KEYS:
            if key in value and (box := _four(value[key])) is not None:
                out.append(centre(box))
                return
        for inner in value.values():
            if isinstance(inner, (list, dict)):
                _points_from_value(inner, out, depth + 1)
    elif isinstance(value, (list, tuple)):
        if (pt := _pair(value)) is not None:
            out.append(pt)
        elif (box := _four(value)) is not None:
            out.append(centre(box))
        else:
            for inner in value:
                _points_from_value(inner, out, depth + 1)


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, str):
        m = _POINT.search(value)
        if m is None:
            return None
        nums = [float(v) for v in m.groups() if v]
        return (nums[0], nums[1])
    if isinstance(value, (list, tuple)) and len(value) == 2:
        x, y = _num(value[0]), _num(value[1])
        if x is not None and y is not None:
            return (x, y)
    return None


def centre(box: Box) -> tuple[float, float]:
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


def scale(coords: Coords, size: tuple[float, float] | None) -> tuple[float, float]:
    """Factors from the model's convention to the reference's pixels."""
    if coords == "pixel":
        return (1.0, 1.0)
    if size is None:
        raise ValueError(f"coords {coords!r} needs the reference's image_size")
    grid = 1.0 if coords == "0-1" else 1000.0
    return (size[0] / grid, size[1] / grid)


def to_pixels(box: Box, factors: tuple[float, float]) -> Box:
    fx, fy = factors
    return (box[0] * fx, box[1] * fy, box[2] * fx, box[3] * fy)


def area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def iou(a: Box, b: Box) -> float:
    inter = area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def giou(a: Box, b: Box) -> float:
    """Generalised IoU (Rezatofighi et al., 2019), in [-1, 1]."""
    hull = area((min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])))
    inter = area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))
    union = area(a) + area(b) - inter
    if hull <= 0 or union <= 0:
        return -1.0
    return inter / union - (hull - union) / hull


def inside(point: tuple[float, float], box: Box) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]
