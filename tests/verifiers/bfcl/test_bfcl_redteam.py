"""A policy attacking the BFCL executor through its calls: ``eval`` tricks, imports, dunder and private attributes,
other classes, BFCL's deny-listed names, hostile argument values. Each step either reads as a named parse failure or
runs as a call of an unknown name (BFCL's NameError text); nothing it names runs, no file appears, the instances'
state stays the scenario's, and the episode scores 0."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verifiers.kinds.bfcl.actions import read_message
from verifiers.kinds.bfcl.episode import Episode
from verifiers.kinds.bfcl.executor import ApiSet, Invocation
from verifiers.kinds.bfcl.source import load_task
from verifiers.kinds.bfcl.verifier import BfclMultiTurnVerifier, judge_trajectory

OPTIONS = BfclMultiTurnVerifier().parse_options({})
TASK = "multi_turn_base_0"  # GorillaFileSystem and TwitterAPI


def attacks(marker: Path) -> list[str]:
    m = str(marker)
    return [
        f"__import__('os').system('touch {m}')",
        f"[cd(folder=__import__('os').system('touch {m}'))]",
        f"eval(source=\"__import__('os').system('touch {m}')\")",
        f"exec(source=\"open('{m}', 'w').write('x')\")",
        f"open(file='{m}', mode='w')",
        "importlib.import_module(name='os')",
        "json.loads(s='[]')",
        "print(value='hi')",
        "getattr(o=cd, name='__globals__')",
        "cd.__globals__(x=1)",
        "__class__(x=1)",
        "__init__()",
        "_load_scenario(scenario={}, long_context=True)",
        "_random(x=1)",
        "GorillaFileSystem._load_scenario(scenario={})",
        "GorillaFileSystem.cd(folder='document')",
        "send_message(receiver_id='USR002', message='hi')",  # MessageAPI is not in this task
        "kill(pid=1)",
        "exit(code=0)",
        "run(cmd='ls')",
        "[cd(folder=lambda: __import__('os').system('id'))]",
        "[cd(folder=os.environ)]",
        "[cd(folder=().__class__.__base__.__subclasses__())]",
        "[cd(**{'folder': 'document'})]",
        "[cd(folder='document')][0].__class__",
        "[f(x=" + "[" * 5000 + "]" * 5000 + ")]",
        "[power(base=2, exponent=2**100000)]",
    ]


def structured(name: str, arguments: Any) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": name, "arguments": args}}]}


STRUCTURED = [
    structured("__import__", {"name": "os"}),
    structured("cd.__globals__", {}),
    structured("_load_scenario", {"scenario": {}}),
    structured("__init__", {}),
    structured("cd", {"folder": "document", "__class__": 1}),
    structured("cd", {"**kwargs": "x"}),
    structured("cd; import os", {"folder": "x"}),
    structured("cd", '{"folder": ' + "[" * 10000),
    structured("GorillaFileSystem", {}),
]


def run_attack(message: dict[str, Any], task_id: str = TASK) -> tuple[Episode, list[str], Any]:
    episode = Episode(load_task(task_id))
    before = episode.model.state()
    step = read_message(message, 200_000)
    results = episode.step(step.calls) if step.runs else []
    assert episode.model.state() == before, message  # nothing changed the instances
    return episode, results, step


def test_call_text_attacks_run_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for text in attacks(marker):
        _, results, step = run_attack({"role": "assistant", "content": text})
        if step.runs:
            # Read as calls: each is refused by name (BFCL's own error texts) or is a legitimate method whose
            # argument arrived as inert text.
            for call, result in zip(step.calls, results):
                assert result.startswith("Error during execution: ") or call.name in ("cd", "power"), (text, result)
        else:
            assert step.error or not step.calls, text
        assert not marker.exists(), text


def test_structured_attacks_run_nothing() -> None:
    for message in STRUCTURED:
        _, results, step = run_attack(message)
        assert not step.runs or all(r.startswith("Error during execution: ") for r in results), (message, results)


def test_names_are_looked_up_never_evaluated() -> None:
    api = ApiSet(load_task(TASK))
    assert api.call(Invocation("__class__")) == "Error during execution: name '__class__' is not defined"
    assert api.call(Invocation("cd.__globals__")) == "Error during execution: name 'cd' is not defined"
    assert api.call(Invocation("kill", {"pid": 1})) == "Error during execution: Function call kill is not allowed."
    assert api.call(Invocation("os.remove", {"path": "/"})) == \
        "Error during execution: Function call remove is not allowed."
    # An argument value that is not JSON-like (only a hand-built call can hold one) is refused before the call.
    assert api.call(Invocation("cd", {"folder": object()})).startswith("Error during execution: ")
    # Argument names that are no Python identifiers fail as BFCL's eval fails on them, without running.
    assert api.call(Invocation("cd", {"class": "x"})).startswith("Error during execution: invalid syntax")
    math = ApiSet(load_task("multi_turn_base_15"))  # MathAPI: BFCL writes an argument back as repr text
    assert math.call(Invocation("mean", {"numbers": [float("inf")]})) == \
        "Error during execution: name 'inf' is not defined"
    assert math.call(Invocation("mean", {"numbers": [1, 2]})) == '{"result": 1.5}'



@pytest.mark.parametrize("text", ["_load_scenario(scenario={})", "__import__(name='os')", "kill(pid=1)"])
def test_an_attacking_episode_scores_zero(text: str) -> None:
    task = load_task(TASK)
    messages: list[dict[str, Any]] = []
    for turn in task.question:
        messages += [turn[-1], {"role": "assistant", "content": f"[{text}]"},
                     {"role": "assistant", "content": "Done."}]
    verdict = judge_trajectory(messages, {"task_id": TASK}, OPTIONS)
    assert verdict.score == 0.0
    assert verdict.turn_scores == [0.0] * len(task.question)
    assert verdict.details["error_type"] in ("multi_turn:instance_state_mismatch",
                                             "multi_turn:execution_response_mismatch")
