"""Request items for the rule-reward kinds, written the way the models they serve write their answers: shared by
the service tests and benchmarks/rule_rewards.py."""
from __future__ import annotations

import json
import random
from typing import Any


def rule_items(kind: str, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` items of one kind, right and wrong answers mixed."""
    rng = random.Random(seed)
    return [_ITEMS[kind](rng, i) for i in range(n)]


def _grounding(rng: random.Random, i: int) -> dict[str, Any]:
    w, h = 1280, 720
    x, y = rng.randint(0, 900), rng.randint(0, 500)
    ref = [x, y, x + rng.randint(40, 300), y + rng.randint(40, 200)]
    pred = [v + rng.randint(-20, 20) for v in ref] if i % 2 else [x + 300, y, ref[2] + 300, ref[3]]
    pred = [max(0, min(v, lim)) for v, lim in zip(pred, (w, h, w, h))]
    text = ("<think>The target is described as the red car near the left edge.</think>"
            f"<answer>```json\n{json.dumps([{'bbox_2d': pred, 'label': 'red car'}])}\n```</answer>")
    return {"verifier": "grounding", "response": text, "reference": {"boxes": [ref], "image_size": [w, h]}}


def _gui(rng: random.Random, i: int) -> dict[str, Any]:
    x, y = rng.randint(100, 900), rng.randint(100, 2000)
    px, py = (x + 20, y + 20) if i % 2 else (x - 200, y + 300)
    text = (f"<think>The search button is near ({px}, {py}).</think>"
            f"<answer>[{{'action': 'click', 'coordinate': [{px}, {py}]}}]</answer>")
    return {"verifier": "gui_action", "response": text,
            "reference": {"action": "click", "box": [x, y, x + 80, y + 80], "image_size": [1080, 2400]}}


def _temporal(rng: random.Random, i: int) -> dict[str, Any]:
    start = round(rng.uniform(0, 100), 1)
    end = round(start + rng.uniform(3, 20), 1)
    got = (start + rng.uniform(-2, 2), end + rng.uniform(-2, 2)) if i % 2 else (end + 5, end + 15)
    text = f"<think>The person opens the door midway.</think><answer>{got[0]:.1f} - {got[1]:.1f} seconds</answer>"
    return {"verifier": "temporal_grounding", "response": text,
            "reference": {"segment": [start, end], "duration": 150}}


_CITIES = ["Paris", "Lyon", "Berlin", "Madrid", "Rome", "Vienna", "Lisbon", "Prague", "Warsaw", "Dublin"]


def _qa(rng: random.Random, i: int) -> dict[str, Any]:
    gold = rng.choice(_CITIES)
    got = gold if i % 2 else rng.choice([c for c in _CITIES if c != gold])
    text = (f"<think>Let me search.</think><search>capital city</search><information>Doc 1: ...</information>"
            f"<think>The document says {got}.</think><answer>The city of {got}</answer>")
    return {"verifier": "qa", "response": text, "reference": [gold, f"{gold} city"]}


def _ranking(rng: random.Random, i: int) -> dict[str, Any]:
    docs = [str(d) for d in range(1, 21)]
    relevance = {d: rng.choice([0, 0, 1, 2, 3]) for d in docs}
    order = rng.sample(docs, len(docs))
    return {"verifier": "ranking", "response": " > ".join(f"[{d}]" for d in order),
            "reference": {"relevance": relevance, "k": 10}}


_SENTENCES = [
    "The committee approved the new budget after a long debate on Tuesday.",
    "Heavy rain caused flooding in several districts of the city overnight.",
    "Researchers found that the drug reduced symptoms in most patients.",
    "The museum will reopen next month with an exhibition of modern art.",
]


def _similarity(rng: random.Random, i: int) -> dict[str, Any]:
    ref = rng.choice(_SENTENCES)
    words = ref.split()
    rng.shuffle(words[: len(words) // 3])
    return {"verifier": "text_similarity", "response": " ".join(words),
            "reference": [ref], "options": {"metric": ("bleu", "chrf", "rouge_l")[i % 3]}}


_ITEMS = {"grounding": _grounding, "gui_action": _gui, "temporal_grounding": _temporal, "qa": _qa,
          "ranking": _ranking, "text_similarity": _similarity}
KINDS = tuple(_ITEMS)
