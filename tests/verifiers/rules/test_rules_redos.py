"""Hostile answers for every rule kind: long runs of digits, spaces, brackets, tags and fences that would make a
backtracking pattern quadratic, deep nesting, and huge lists. Each check ends quickly with a verdict.

The inputs are ten times the size the event loop accepts inline (20,000 characters): a quadratic reader would take
minutes on them, a linear one well under a second; the bound asserted is loose enough for a loaded machine.
"""
from __future__ import annotations

import time

import pytest

from verifiers.kinds.rules import VERIFIERS

N = 200_000
HOSTILE = {
    "digits": "1" * N,
    "spaces": "(" + " " * N + "x",
    "open_parens": "(1, " * (N // 4),
    "open_brackets": "[" * N,
    "box_tags": "<box>" * (N // 5),
    "qwen_tags": "<|box_start|>(1," * (N // 16),
    "fences": "```json\n" * (N // 8),
    "blank_lines": "\n" * N + "1. a",
    "numbered": "1. " + " " * N + "x",
    "answer_tags": "<answer>" * (N // 8),
    "times": "12:34:" * (N // 6),
    "deep_json": "[" * 5000 + "]" * 5000,
    "many_boxes": str([[i, i, i + 5, i + 5] for i in range(5000)]),
    "calls": "click(x=1, y=2) " * (N // 16),
    "starts": "starts at " * (N // 10),
}
REFERENCES = {
    "grounding": {"boxes": [[0, 0, 10, 10]], "image_size": [100, 100]},
    "gui_action": {"action": "click", "box": [0, 0, 10, 10]},
    "temporal_grounding": [1, 2],
    "qa": ["Paris"],
    "ranking": {"relevance": {"a": 1}},
    "text_similarity": ["a short reference sentence"],
}


@pytest.mark.parametrize("kind", sorted(REFERENCES))
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_answers_end_with_a_verdict(kind: str, name: str) -> None:
    verifier = next(v for v in VERIFIERS if v.name == kind)
    started = time.perf_counter()
    verdict = verifier.check(HOSTILE[name], REFERENCES[kind], verifier.parse_options({}))
    elapsed = time.perf_counter() - started
    assert verdict.status.value in ("ok", "rejected", "no_answer"), verdict
    assert elapsed < 15, f"{kind} took {elapsed:.1f}s on {name}"
