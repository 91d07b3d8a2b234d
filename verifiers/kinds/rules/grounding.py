"""``grounding``: boxes and clicks against reference boxes (referring expressions, detection, GUI grounding).

Metrics: ``iou`` / ``giou`` (one box, or several matched one-to-one by maximum total IoU), ``f1`` (precision and
recall of a one-to-one matching at ``match_iou``), ``ap`` (COCO average precision of a scored detection list, computed
by pycocotools itself), ``point`` (a click inside a reference box). ``threshold`` turns the metric into 1/0.

The guards are the hacks rule rewards for grounding invite: a box over most of the image when the target is small,
boxes outside the image or degenerate, more boxes than the reference asks for, and several different boxes for a
one-box question (a hedge, refused as in ``math``).
"""
from __future__ import annotations

import contextlib
import io
from typing import Any, Literal

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.rules.answer import answer_text, metric_verdict
from verifiers.kinds.rules.boxes import (
    Box,
    Coords,
    area,
    giou,
    inside,
    iou,
    read_boxes,
    read_points,
    scale,
    to_pixels,
    value_boxes,
)
from verifiers.kinds.rules.matching import max_weight_matching
from verifiers.types import InvalidReference, Verdict, VerifierUnavailable

Metric = Literal["auto", "iou", "giou", "f1", "ap", "point"]
# Boxes that overlap this much are one box written twice, not two answers.
SAME_BOX_IOU = 0.9


class GroundingOptions(BaseOptions):
    coords: Coords = Field("pixel", description="The response's convention: pixel, 0-1 or the 0-1000 grid.")
    box_format: Literal["xyxy", "xywh"] = Field("xyxy", description="xyxy: corners; xywh: corner, width, height.")
    metric: Metric = Field("auto", description="auto: iou for one reference box, f1 for several, point for clicks.")
    threshold: float | None = Field(None, ge=0, le=1, description="Score 1 when the metric reaches it, else 0.")
    match_iou: float = Field(0.5, gt=0, le=1, description="IoU at which a box counts as found (f1).")
    ap_iou: Literal["coco", "0.5", "0.75"] = Field("coco", description="AP over IoU 0.5:0.95 (coco), or at one IoU.")
    max_boxes: int | None = Field(None, ge=1, le=1000, description="Most boxes accepted (default: iou/giou/point: "
                                  "the reference's count; f1: 3x it; ap: 100).")
    max_area_fraction: float = Field(0.8, gt=0, le=1, description="A box covering more of the image than this is "
                                     "refused when every reference box covers less than small_target_fraction.")
    small_target_fraction: float = Field(0.3, gt=0, le=1)
    outside_tolerance: float = Field(0.02, ge=0, le=1, description="How far past the image edge (a fraction of its "
                                     "size) a coordinate may go before the box is refused; smaller overshoot is "
                                     "clipped.")


def parse_reference(reference: Any) -> tuple[list[Box], tuple[float, float] | None, list[str | None]]:
    if isinstance(reference, list):
        reference = {"boxes": reference}
    if not isinstance(reference, dict):
        raise InvalidReference('reference must be {"boxes": [[x1, y1, x2, y2], ...], "image_size": [w, h]}')
    raw = reference.get("boxes", [reference["box"]] if "box" in reference else None)
    if not isinstance(raw, list) or not raw:
        raise InvalidReference("reference.boxes must be a non-empty list of [x1, y1, x2, y2]")
    boxes: list[Box] = []
    labels: list[str | None] = []
    for i, item in enumerate(raw):
        found = value_boxes(item)
        if len(found) != 1 or area(found[0].box) <= 0:
            raise InvalidReference(f"reference.boxes[{i}] is not a box [x1, y1, x2, y2] with x2 > x1 and y2 > y1")
        boxes.append(found[0].box)
        labels.append(found[0].label)
    size = reference.get("image_size")
    if size is not None:
        if not (isinstance(size, (list, tuple)) and len(size) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in size)):
            raise InvalidReference("reference.image_size must be [width, height] in pixels")
        size = (float(size[0]), float(size[1]))
    return boxes, size, labels


def _normalise(box: Box, options: GroundingOptions, factors: tuple[float, float]) -> Box:
    if options.box_format == "xywh":
        box = (box[0], box[1], box[0] + box[2], box[1] + box[3])
    return to_pixels(box, factors)


def _guard(box: Box, size: tuple[float, float] | None, options: GroundingOptions) -> tuple[Box | None, str]:
    """The box clipped to the image, or None and why it is refused."""
    if box[2] <= box[0] or box[3] <= box[1]:
        return None, f"degenerate box {list(box)} (x2 <= x1 or y2 <= y1)"
    if size is None:
        return box, ""
    w, h = size
    tx, ty = w * options.outside_tolerance, h * options.outside_tolerance
    if box[0] < -tx or box[1] < -ty or box[2] > w + tx or box[3] > h + ty:
        return None, f"box {list(box)} lies outside the {w:g}x{h:g} image"
    clipped = (max(0.0, box[0]), max(0.0, box[1]), min(w, box[2]), min(h, box[3]))
    if area(clipped) <= 0:
        return None, f"box {list(box)} has no area inside the image"
    return clipped, ""


def _distinct(boxes: list[Box], enough: int) -> list[Box]:
    """The boxes that are not another written twice; stops at ``enough`` (all a refusal needs to know)."""
    kept: list[Box] = []
    for b in boxes:
        if all(iou(b, k) < SAME_BOX_IOU for k in kept):
            kept.append(b)
            if len(kept) >= enough:
                break
    return kept


def _matching(preds: list[Box], refs: list[Box], metric: Any) -> list[tuple[int, int, float]]:
    """One-to-one pairs maximising the total metric."""
    matrix = [[metric(p, r) for r in refs] for p in preds]
    return [(i, j, matrix[i][j]) for i, j in max_weight_matching(matrix)]


def coco_ap(preds: list[tuple[Box, float]], refs: list[Box], which: str) -> float:
    """COCO AP by pycocotools on one image, one category (boxes in xyxy pixels)."""
    try:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    except ImportError:
        raise VerifierUnavailable("metric ap needs pycocotools (pip install reward-service[rules])") from None
    if not preds:
        return 0.0
    gt = COCO()
    gt.dataset = {
        "images": [{"id": 1}],
        "categories": [{"id": 1}],
        "annotations": [
            {"id": i + 1, "image_id": 1, "category_id": 1, "iscrowd": 0,
             "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]], "area": area(b)}
            for i, b in enumerate(refs)
        ],
    }
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        dt = gt.loadRes([
            {"image_id": 1, "category_id": 1, "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]], "score": s}
            for b, s in preds
        ])
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    value = float(ev.stats[{"coco": 0, "0.5": 1, "0.75": 2}[which]])
    return max(0.0, value)


class GroundingVerifier(Verifier[GroundingOptions]):
    name = "grounding"
    description = ("Boxes or clicks read from the answer (JSON, [x1,y1,x2,y2], Qwen box tokens, <box> tags) against "
                   "reference boxes: IoU, GIoU, F1 at an IoU, COCO AP, or point-in-box.")
    Options = GroundingOptions
    binary = False
    # Linear reading with bounded patterns, at most 1,000 boxes, pairwise work bounded by max_boxes: cheap enough for
    # the event loop except AP, which builds pycocotools' structures per item.
    inline_max_chars = 20_000

    def inline_ok(self, options: GroundingOptions) -> bool:
        return options.metric != "ap"

    def check(self, response: str, reference: Any, options: GroundingOptions) -> Verdict:
        refs, size, _ = parse_reference(reference)
        try:
            factors = scale(options.coords, size)
        except ValueError as exc:
            raise InvalidReference(str(exc)) from None
        metric = options.metric
        if metric == "auto":
            metric = "iou" if len(refs) == 1 else "f1"
        text = answer_text(response)
        if metric == "point":
            return self._point(text, refs, size, factors, options)
        read = read_boxes(text)
        if not read:
            return Verdict.no_answer("no box found in the answer")
        boxes: list[Box] = []
        scores: list[float] = []
        for item in read:
            box, why = _guard(_normalise(item.box, options, factors), size, options)
            if box is None:
                return Verdict.rejected(why, boxes=[list(b.box) for b in read[:20]])
            boxes.append(box)
            scores.append(item.score if item.score is not None else 1.0)
        if size is not None and all(area(r) < options.small_target_fraction * size[0] * size[1] for r in refs):
            big = [b for b in boxes if area(b) > options.max_area_fraction * size[0] * size[1]]
            if big:
                return Verdict.rejected("a box covers most of the image while the target is small",
                                        box=list(big[0]))
        limit = options.max_boxes or {"iou": len(refs), "giou": len(refs), "f1": 3 * len(refs), "ap": 100}[metric]
        distinct = _distinct(boxes, limit + 1) if metric in ("iou", "giou") else boxes
        if len(distinct) > limit:
            reason = (f"several different boxes for {len(refs)} target(s)" if metric in ("iou", "giou")
                      else f"{len(distinct)} boxes where at most {limit} are accepted")
            return Verdict.rejected(reason, n_boxes=len(distinct), max_boxes=limit)
        details: dict[str, Any] = {"metric": metric, "boxes": [[round(v, 2) for v in b] for b in distinct]}
        if metric == "ap":
            value = coco_ap(list(zip(boxes, scores)), refs, options.ap_iou)
        elif metric == "f1":
            pairs = _matching(boxes, refs, iou)
            hits = sum(1 for _, _, v in pairs if v >= options.match_iou)
            precision, recall = hits / len(boxes), hits / len(refs)
            value = 2 * precision * recall / (precision + recall) if hits else 0.0
            details.update(precision=precision, recall=recall, matched=hits)
        else:
            fn = iou if metric == "iou" else giou
            pairs = _matching(distinct, refs, fn)
            per = [v for _, _, v in pairs]
            value = sum(per) / max(len(distinct), len(refs))
            details["per_box"] = [round(v, 4) for v in per]
            if metric == "giou":
                value = (value + 1) / 2  # scores live in [0, 1]; the raw GIoU is in details
                details["giou"] = sum(per) / max(len(distinct), len(refs))
        details["value"] = value
        return metric_verdict(value, metric, options.threshold, **details)

    def _point(self, text: str, refs: list[Box], size: tuple[float, float] | None,
               factors: tuple[float, float], options: GroundingOptions) -> Verdict:
        points = [(x * factors[0], y * factors[1]) for x, y in read_points(text)]
        if not points:
            return Verdict.no_answer("no point found in the answer")
        distinct = list(dict.fromkeys((round(x, 1), round(y, 1)) for x, y in points))
        if len(distinct) > (options.max_boxes or len(refs)):
            return Verdict.rejected(f"{len(distinct)} different points for {len(refs)} target(s)",
                                    points=[list(p) for p in distinct[:20]])
        if size is not None and any(not inside(p, (0.0, 0.0, size[0], size[1])) for p in distinct):
            return Verdict.rejected("a point lies outside the image", points=[list(p) for p in distinct[:20]])
        hits = sum(1 for p in distinct if any(inside(p, r) for r in refs))
        value = hits / len(refs)
        return metric_verdict(value, "point", options.threshold, metric="point",
                              points=[list(p) for p in distinct], hits=hits, value=value)
