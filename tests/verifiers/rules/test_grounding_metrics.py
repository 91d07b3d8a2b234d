"""grounding's metrics against pycocotools on generated cases, with the boxes written as models write them."""
from __future__ import annotations

import contextlib
import io
import json
import random

import pytest

from verifiers.kinds.rules.grounding import GroundingVerifier

pytest.importorskip("pycocotools")
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

G = GroundingVerifier()


def _box(rng: random.Random, w: int, h: int) -> list[float]:
    x1, y1 = rng.uniform(0, w * 0.8), rng.uniform(0, h * 0.8)
    return [round(x1, 1), round(y1, 1), round(min(w, x1 + rng.uniform(5, w * 0.25)), 1),
            round(min(h, y1 + rng.uniform(5, h * 0.25)), 1)]


def _near(rng: random.Random, box: list[float], w: int, h: int) -> list[float]:
    jitter = [rng.uniform(-15, 15) for _ in range(4)]
    b = [min(max(0.0, v + j), lim) for v, j, lim in zip(box, jitter, (w, h, w, h))]
    if b[2] <= b[0] + 1 or b[3] <= b[1] + 1:
        return box
    return [round(v, 1) for v in b]


def _xywh(b: list[float]) -> list[float]:
    return [b[0], b[1], b[2] - b[0], b[3] - b[1]]


def test_iou_equals_pycocotools_on_1000_pairs() -> None:
    rng = random.Random(7)
    for i in range(1000):
        w, h = rng.choice([(640, 480), (1920, 1080), (1000, 1000)])
        ref = _box(rng, w, h)
        pred = _near(rng, ref, w, h) if i % 3 else _box(rng, w, h)
        want = float(mask_utils.iou([_xywh(pred)], [_xywh(ref)], [0])[0][0])
        fmt = i % 4
        if fmt == 0:
            text = f"<answer>{json.dumps(pred)}</answer>"
        elif fmt == 1:
            text = "```json\n" + json.dumps([{"bbox_2d": pred, "label": "target"}]) + "\n```"
        elif fmt == 2:
            text = f"The object is at ({pred[0]}, {pred[1]}), ({pred[2]}, {pred[3]})."
        else:
            text = f"<think>look at [{0}, {0}, {5}, {5}]</think><answer>{{'bbox': {pred}}}</answer>"
        v = G.check(text, {"boxes": [ref], "image_size": [w, h]}, G.Options(max_area_fraction=1.0))
        assert v.status.value == "ok", (text, v)
        assert v.score == pytest.approx(want, abs=1e-9), (text, ref, v)


def _coco_ap(preds: list[tuple[list[float], float]], refs: list[list[float]], stat: int) -> float:
    gt = COCO()
    gt.dataset = {"images": [{"id": 1}], "categories": [{"id": 1}], "annotations": [
        {"id": i + 1, "image_id": 1, "category_id": 1, "iscrowd": 0, "bbox": _xywh(b),
         "area": (b[2] - b[0]) * (b[3] - b[1])} for i, b in enumerate(refs)]}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        dt = gt.loadRes([{"image_id": 1, "category_id": 1, "bbox": _xywh(b), "score": s} for b, s in preds])
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return max(0.0, float(ev.stats[stat]))


def test_ap_equals_pycocotools_on_1000_detection_lists() -> None:
    rng = random.Random(11)
    for i in range(1000):
        w, h = 800, 600
        refs = [_box(rng, w, h) for _ in range(rng.randint(1, 4))]
        preds = [(_near(rng, r, w, h), round(rng.uniform(0.3, 1.0), 3)) for r in refs if rng.random() < 0.85]
        preds += [(_box(rng, w, h), round(rng.uniform(0.0, 0.6), 3)) for _ in range(rng.randint(0, 3))]
        which = ("coco", "0.5", "0.75")[i % 3]
        text = json.dumps([{"bbox_2d": b, "score": s, "label": "car"} for b, s in preds])
        v = G.check(text, {"boxes": refs, "image_size": [w, h]}, G.Options(metric="ap", ap_iou=which))
        if not preds:
            assert v.status.value == "no_answer"
            continue
        assert v.status.value == "ok", v
        assert v.score == pytest.approx(_coco_ap(preds, refs, i % 3), abs=1e-9)


def test_f1_is_a_one_to_one_matching() -> None:
    refs = [[0, 0, 100, 100], [200, 200, 300, 300]]
    # Two boxes on the first object: only one of them may be matched.
    v = G.check("[[0,0,100,100],[2,2,100,100]]", {"boxes": refs, "image_size": [1000, 1000]}, G.Options())
    assert v.details["matched"] == 1 and v.score == pytest.approx(0.5)
    v = G.check("[[0,0,100,100],[200,200,300,300]]", {"boxes": refs, "image_size": [1000, 1000]}, G.Options())
    assert v.score == 1.0


def test_giou_scores_a_near_miss_above_a_far_miss() -> None:
    ref = {"boxes": [[100, 100, 200, 200]], "image_size": [1000, 1000]}
    near = G.check("[210, 100, 310, 200]", ref, G.Options(metric="giou"))
    far = G.check("[800, 800, 900, 900]", ref, G.Options(metric="giou"))
    assert near.score is not None and far.score is not None
    assert near.details["giou"] < 0 and far.details["giou"] < near.details["giou"]
    assert 0 <= far.score < near.score < 0.5


def test_matching_equals_scipy_on_500_matrices() -> None:
    linear_sum_assignment = pytest.importorskip("scipy.optimize").linear_sum_assignment
    from verifiers.kinds.rules.matching import max_weight_matching

    rng = random.Random(17)
    for _ in range(500):
        rows, cols = rng.randint(1, 7), rng.randint(1, 7)
        matrix = [[rng.choice([0.0, rng.random()]) for _ in range(cols)] for _ in range(rows)]
        r, c = linear_sum_assignment(matrix, maximize=True)
        want = sum(matrix[i][j] for i, j in zip(r, c))
        pairs = max_weight_matching(matrix)
        assert len(pairs) == min(rows, cols)
        assert len({i for i, _ in pairs}) == len(pairs) == len({j for _, j in pairs})
        assert sum(matrix[i][j] for i, j in pairs) == pytest.approx(want)
