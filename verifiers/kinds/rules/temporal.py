"""``temporal_grounding``: a ``[start, end]`` segment of a video against the reference segment.

Read from the answer: JSON (``[s, e]``, ``{"start": s, "end": e}``, ``{"segment": [s, e]}``), ``s - e`` or
``from s to e`` in prose, with seconds (``12.5``, ``12.5s``) or timestamps (``01:05``, ``00:01:05.5``). Guards: a
segment that covers most of the video when the target is short, a reversed or empty segment, and several different
segments for one moment (a hedge).
"""
from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.rules.answer import answer_text, metric_verdict, structured_values
from verifiers.types import InvalidReference, Verdict

Segment = tuple[float, float]

# Bounded repeats throughout: a run of digits or spaces retried from each position must stay linear.
_TIME = r"(?<![\d.:])(?:\d{1,2}:)?\d{1,6}:\d{1,2}(?:\.\d{1,6})?|(?<![\d.:])\d{1,9}(?:\.\d{1,6})?"
_UNIT = r"[ \t]{0,4}(?:s|sec|secs|second|seconds)?\b"
_SPAN = re.compile(
    rf"(?P<a>{_TIME}){_UNIT}[ \t]{{0,8}}(?:-|–|—|~|to|until|and)[ \t]{{0,8}}(?P<b>{_TIME}){_UNIT}", re.IGNORECASE)
# "starts at 00:15 and ends at 00:21", "beginning around 12 s ... ending at 18 s"
_STARTS_ENDS = re.compile(
    rf"\b(?:start|begin)\w*[^\d\n]{{0,24}}?(?P<a>{_TIME}){_UNIT}[^\n]{{0,60}}?"
    rf"\b(?:end|finish|stop)\w*[^\d\n]{{0,24}}?(?P<b>{_TIME}){_UNIT}", re.IGNORECASE)
SAME_SEGMENT_IOU = 0.9


def seconds(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    text = value.strip().lower().removesuffix("seconds").removesuffix("second").removesuffix("s").strip()
    parts = text.split(":")
    if len(parts) > 3:
        return None
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        return None
    total = 0.0
    for n in nums:
        total = total * 60 + n
    return total


def _segment(value: Any) -> Segment | None:
    if isinstance(value, dict):
        for key in ("segment", "timestamp", "timestamps", "time", "span"):
            if key in value:
                return _segment(value[key])
        if "start" in value and "end" in value:
            return _segment([value["start"], value["end"]])
        return None
    if isinstance(value, (list, tuple)) and len(value) == 2:
        a, b = seconds(value[0]), seconds(value[1])
        if a is not None and b is not None:
            return (a, b)
    return None


def read_segments(text: str) -> list[Segment]:
    found: list[Segment] = []
    for value in structured_values(text):
        items = value if isinstance(value, list) and value and not _segment(value) else [value]
        for item in items[:100]:
            seg = _segment(item)
            if seg is not None:
                found.append(seg)
    if found:
        return found
    for m in [*_SPAN.finditer(text), *_STARTS_ENDS.finditer(text)]:
        a, b = seconds(m.group("a")), seconds(m.group("b"))
        if a is not None and b is not None:
            found.append((a, b))
        if len(found) >= 100:
            break
    return found


def tiou(a: Segment, b: Segment) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


class TemporalOptions(BaseOptions):
    threshold: float | None = Field(None, ge=0, le=1, description="Score 1 when the temporal IoU reaches it.")
    max_duration_fraction: float = Field(0.8, gt=0, le=1, description="A segment covering more of the video is "
                                         "refused when the reference covers less than half of it (needs duration).")


class TemporalGroundingVerifier(Verifier[TemporalOptions]):
    name = "temporal_grounding"
    description = "A [start, end] segment (seconds or timestamps) read from the answer; temporal IoU."
    Options = TemporalOptions
    binary = False
    inline_max_chars = 20_000

    def check(self, response: str, reference: Any, options: TemporalOptions) -> Verdict:
        ref, duration = _reference(reference)
        segments = read_segments(answer_text(response))
        if not segments:
            return Verdict.no_answer("no [start, end] segment found in the answer")
        for seg in segments:
            if seg[1] <= seg[0]:
                return Verdict.rejected(f"segment {list(seg)} ends before it starts", segment=list(seg))
            if duration is not None and (seg[0] < 0 or seg[1] > duration * 1.02):
                return Verdict.rejected(f"segment {list(seg)} lies outside the {duration:g} s video")
        distinct: list[Segment] = []
        for seg in segments:
            if all(tiou(seg, d) < SAME_SEGMENT_IOU for d in distinct):
                distinct.append(seg)
        if len(distinct) > 1:
            return Verdict.rejected("several different segments for one moment",
                                    segments=[list(s) for s in distinct[:20]])
        seg = distinct[0]
        if (duration is not None and (ref[1] - ref[0]) < 0.5 * duration
                and seg[1] - seg[0] > options.max_duration_fraction * duration):
            return Verdict.rejected("the segment covers most of the video while the moment is short",
                                    segment=list(seg))
        value = tiou(seg, ref)
        return metric_verdict(value, "tIoU", options.threshold, segment=list(seg), tiou=value)


def _reference(reference: Any) -> tuple[Segment, float | None]:
    duration = None
    if isinstance(reference, dict):
        duration = seconds(reference.get("duration")) if reference.get("duration") is not None else None
        if reference.get("duration") is not None and (duration is None or duration <= 0):
            raise InvalidReference("reference.duration must be a positive number of seconds")
    seg = _segment(reference)
    if seg is None or seg[1] <= seg[0]:
        raise InvalidReference('reference must be [start, end] or {"segment": [start, end], "duration": s} '
                               "with end > start")
    return seg, duration
