"""Boxes and clicks written the way grounding models write them, in every coordinate convention, and the guards."""
from __future__ import annotations

import pytest

from verifiers.kinds.rules.grounding import GroundingVerifier
from verifiers.types import InvalidReference

G = GroundingVerifier()
# A 1280x720 screenshot; the target spans x 320-640, y 180-360 in pixels.
REF = {"boxes": [[320, 180, 640, 360]], "image_size": [1280, 720]}


@pytest.mark.parametrize("coords, response", [
    # Qwen2.5-VL: absolute pixels in a fenced JSON list.
    ("pixel", '```json\n[\n\t{"bbox_2d": [320, 180, 640, 360], "label": "the red car"}\n]\n```'),
    # VLM-R1 / Visual-RFT: reasoning, then the box in answer tags.
    ("pixel", "<think>The red car is on the left side.</think>\n<answer>[320, 180, 640, 360]</answer>"),
    ("pixel", '<answer>{"bbox": [320, 180, 640, 360]}</answer>'),
    ("pixel", '{"x1": 320, "y1": 180, "x2": 640, "y2": 360}'),
    ("pixel", "The box is (320, 180), (640, 360)."),
    # Qwen2-VL: box tokens on the 0-1000 grid.
    ("0-1000", "<|object_ref_start|>the red car<|object_ref_end|><|box_start|>(250,250),(500,500)<|box_end|>"),
    # Qwen-VL: <ref> and <box> tags on the 0-1000 grid.
    ("0-1000", "<ref>the red car</ref><box>(250,250),(500,500)</box>"),
    # InternVL: <box>[[x1, y1, x2, y2]]</box> on the 0-1000 grid.
    ("0-1000", "<ref>the red car</ref><box>[[250, 250, 500, 500]]</box>"),
    # Normalised [0, 1].
    ("0-1", "[0.25, 0.25, 0.5, 0.5]"),
    ("0-1", "<answer>[{'bbox_2d': [0.25, 0.25, 0.5, 0.5], 'label': 'car'}]</answer><|im_end|>"),
])
def test_each_format_and_convention_reads_the_same_box(coords: str, response: str) -> None:
    v = G.check(response, REF, G.Options(coords=coords))
    assert (v.status.value, v.score) == ("ok", pytest.approx(1.0)), v


def test_xywh_format() -> None:
    v = G.check("[320, 180, 320, 180]", REF, G.Options(box_format="xywh"))
    assert v.score == pytest.approx(1.0)


def test_threshold_scores_one_or_zero() -> None:
    assert G.check("[330, 190, 650, 370]", REF, G.Options(threshold=0.5)).score == 1.0
    assert G.check("[500, 300, 800, 500]", REF, G.Options(threshold=0.5)).score == 0.0


@pytest.mark.parametrize("response, reason", [
    ("[0, 0, 1280, 720]", "covers most of the image"),  # the whole screen for a small target
    ("[0, 0, 1270, 700]", "covers most of the image"),
    ("[320, 180, 640, 360] [900, 500, 1200, 700]", "several different boxes"),  # a hedge over two objects
    ("<answer>[[320,180,640,360],[0,0,100,100],[700,100,800,200]]</answer>", "several different boxes"),
    ("[640, 360, 320, 180]", "degenerate"),  # corners swapped
    ("[320, 180, 320, 360]", "degenerate"),  # no width
    ("[320, 180, 2000, 360]", "outside"),
    ("[-300, 180, 640, 360]", "outside"),
])
def test_guards_refuse_the_hacks(response: str, reason: str) -> None:
    v = G.check(response, REF, G.Options())
    assert v.status.value == "rejected" and v.score == 0.0 and reason in v.reason, v


def test_the_same_box_written_twice_is_one_answer() -> None:
    v = G.check("[320, 180, 640, 360] that is [321, 180, 640, 361]", REF, G.Options())
    assert v.status.value == "ok" and v.score == pytest.approx(1.0, abs=0.01)


def test_a_small_overshoot_is_clipped() -> None:
    edge = {"boxes": [[320, 540, 640, 720]], "image_size": [1280, 720]}
    v = G.check("[320, 540, 640, 730]", edge, G.Options())
    assert v.status.value == "ok" and v.score == pytest.approx(1.0)


def test_more_boxes_than_f1_accepts() -> None:
    refs = {"boxes": [[10, 10, 50, 50]], "image_size": [1000, 1000]}
    twenty = [[10 + 40 * i, 10, 50 + 40 * i, 50] for i in range(20)]
    v = G.check(str(twenty), refs, G.Options(metric="f1"))
    assert v.status.value == "rejected" and "20 boxes" in v.reason


@pytest.mark.parametrize("response, score", [
    ("click(start_box='(480,270)')", 1.0),
    ("<answer>[480, 270]</answer>", 1.0),
    ('{"point_2d": [480, 270]}', 1.0),
    ("(100, 100)", 0.0),
    ("[330, 190, 630, 350]", 1.0),  # a box stands for its centre
])
def test_point_in_box(response: str, score: float) -> None:
    v = G.check(response, REF, G.Options(metric="point"))
    assert (v.status.value, v.score) == ("ok", score), v


def test_a_click_hedged_over_several_points_is_refused() -> None:
    v = G.check("(480, 270) or (100, 100) or (900, 600)", REF, G.Options(metric="point"))
    assert v.status.value == "rejected"


def test_no_box_and_bad_references() -> None:
    assert G.check("I cannot see it", REF, G.Options()).status.value == "no_answer"
    assert G.check("", REF, G.Options()).status.value == "no_answer"
    for bad in ({"boxes": []}, {"boxes": [[5, 5, 1, 1]]}, "box", {"boxes": [[0, 0, 1, 1]], "image_size": [0, 9]}):
        with pytest.raises(InvalidReference):
            G.check("[0, 0, 1, 1]", bad, G.Options())
    with pytest.raises(InvalidReference):  # a normalised convention needs the image size
        G.check("[0.1, 0.1, 0.2, 0.2]", {"boxes": [[0, 0, 1, 1]]}, G.Options(coords="0-1"))
