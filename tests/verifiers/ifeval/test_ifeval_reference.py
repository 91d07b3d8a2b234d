"""Agreement with the published IFEval checker's verdicts on GPT-4's responses (reference run shipped with IFEval)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifiers.kinds.ifeval import follow_list, parse_reference

PUBLISHED_PROMPT_ACCURACY = {"strict": 0.769, "loose": 0.798}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("mode", ["strict", "loose"])
def test_agrees_with_reference_checker(shared_data: Path, mode: str) -> None:
    root = shared_data / "ifeval"
    inputs = {row["prompt"]: row for row in _jsonl(root / "input_data.jsonl")}
    responses = {row["prompt"]: row["response"] for row in _jsonl(root / "input_response_data_gpt4.jsonl")}
    expected = _jsonl(root / f"eval_results_{mode}.jsonl")
    assert len(expected) == 540

    constraints = agreed = prompts_followed = 0
    disagreements = []
    for row in expected:
        spec = inputs[row["prompt"]]
        assert spec["instruction_id_list"] == row["instruction_id_list"]
        got = follow_list(responses[row["prompt"]], parse_reference(spec), mode)
        prompts_followed += all(got)
        for iid, kwargs, mine, theirs in zip(spec["instruction_id_list"], spec["kwargs"], got,
                                             row["follow_instruction_list"]):
            constraints += 1
            agreed += mine == theirs
            if mine != theirs:
                disagreements.append(f"  key={spec['key']} {iid} {kwargs}: ours={mine} reference={theirs}")

    agreement = agreed / constraints
    accuracy = prompts_followed / len(expected)
    print(f"\n[{mode}] constraint agreement {agreed}/{constraints} = {agreement:.4f}; "
          f"prompt-level accuracy {accuracy:.4f} (published {PUBLISHED_PROMPT_ACCURACY[mode]})")
    print("\n".join(disagreements) or "  no disagreements")
    assert constraints == 832
    assert agreement >= 0.995
    assert abs(accuracy - PUBLISHED_PROMPT_ACCURACY[mode]) <= 0.005
