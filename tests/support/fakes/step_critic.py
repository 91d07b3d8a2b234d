"""A judge double for generative PRMs: it answers the step-critique prompts with per-step verdicts, knowing each
ProcessBench sample's labelled first error and flagging it with deterministic noise (misses, off-by-one flags,
false alarms), so an F1 computed from its verdicts is meaningful and reproducible.

Plug ``StepCritic(samples)`` into ``FakeOpenAI(responder=...)``. It reads the prompt as a model would: the problem
and the steps from the quoted blocks (the steps as the JSON list the prompt carries), the step under judgement in
per-step mode from the closing question. It answers in the JSON format or in ThinkPRM's boxed format (chosen per
sample), so both parsers are exercised.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from tests.support.fakes.openai_server import split_prompt


def _roll(*parts: str) -> float:
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return int(digest[:8], 16) / 0x1_0000_0000


def _key(problem: str, first_step: str) -> str:
    return hashlib.sha256(f"{problem.strip()}\x1f{first_step.strip()}".encode()).hexdigest()


def _flag(problem: str, first_step: str, label: int) -> int:
    """The step the double flags first, whatever the solution's length (-1: none): the label 75% of the time, the
    step after it 12%, nothing 13%; on a correct solution a false alarm at one of the first 4 steps 15% of the time.
    It does not depend on how many steps the double is shown, so per-step calls agree with whole-solution calls."""
    r = _roll(problem, first_step)
    if label == -1:
        return int(_roll("alarm", problem) * 4) if r < 0.15 else -1
    if r < 0.13:
        return -1
    return label + 1 if r < 0.25 else label


def planned_first_error(problem: str, steps: list[str], label: int) -> int:
    """ProcessBench's prediction the double's verdicts lead to (-1: none)."""
    flag = _flag(problem, steps[0], label)
    return flag if 0 <= flag < len(steps) else -1


def _block(blocks: dict[str, str], prefix: str) -> str:
    return next((v for k, v in blocks.items() if k == prefix or k.startswith(prefix + "-")), "")


class StepCritic:
    def __init__(self, samples: Iterable[dict[str, Any]] = ()) -> None:
        self.labels = {_key(s["problem"], s["steps"][0]): int(s["label"]) for s in samples}

    def verdicts(self, problem: str, steps: list[str]) -> list[bool]:
        flag = _flag(problem, steps[0], self.labels.get(_key(problem, steps[0]), -1))
        return [flag == -1 or k < flag for k in range(len(steps))]  # wrong: the flagged step and what follows

    def __call__(self, messages: list[dict[str, str]]) -> str:
        user = " ".join(m["content"] for m in messages if m["role"] != "system")
        _, blocks = split_prompt(user)
        problem = _block(blocks, "problem")
        single = re.search(r"Is step (\d+) correct\?", user)
        if single:  # per-step mode: the earlier steps and this one
            earlier = [s["text"] for s in json.loads(_block(blocks, "earlier-steps") or "[]")]
            steps = [*earlier, _block(blocks, "step")]
            index = int(single.group(1)) - 1
            ok = self.verdicts(problem, steps)[index]
            return json.dumps({"critique": "checked", "correct": ok})
        steps = [s["text"] for s in json.loads(_block(blocks, "solution"))]
        marks = self.verdicts(problem, steps)
        if _roll("format", problem) < 0.5:
            return json.dumps({"steps": [{"step": k + 1, "critique": "checked", "correct": ok}
                                         for k, ok in enumerate(marks)]})
        return "\n".join(f"Step {k + 1}: the computation is {'right' if ok else 'wrong'}. "
                         f"The step is \\boxed{{{'correct' if ok else 'incorrect'}}}" for k, ok in enumerate(marks))
