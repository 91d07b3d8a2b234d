"""``bfcl_multi_turn`` through the real server: trajectories as messages (structured calls and call text), the task
named or given inline, partial credit, BFCL's irrelevance rule as an option, and a named status for each thing that
cannot be scored (a task id bfcl-eval does not have, a class that is not BFCL's, an item without messages, a call
that runs past the deadline)."""
from __future__ import annotations

from typing import Any

from tests.support.bfcl_episodes import EpisodeCase, messages, model_call
from tests.support.server import LiveServer
from verifiers.kinds.bfcl.source import load_task


def episode(task_id: str, mutation: str = "canonical", text: bool = False) -> list[dict[str, Any]]:
    task = load_task(task_id)
    turns = [[[model_call(task, c) for c in turn], "prose"] if turn else ["prose"] for turn in task.ground_truth]
    if mutation == "skip_second_turn":
        turns[1] = ["prose"]
    return messages(EpisodeCase(task, mutation, turns, text=text))  # type: ignore[arg-type]


def test_bfcl_multi_turn_over_http(server: LiveServer) -> None:
    miss = load_task("multi_turn_miss_func_0")
    inline = {"id": miss.id, "initial_config": miss.initial_config, "involved_classes": miss.involved_classes,
              "question": miss.question, "ground_truth": miss.ground_truth, "missed_function": miss.missed_function}
    hang = [{"role": "user", "content": "compute"},
            {"role": "assistant", "content": "[power(base=10, exponent=1000000000)]"}]
    items = [
        {"id": "right", "messages": episode("multi_turn_base_0"), "reference": {"task_id": "multi_turn_base_0"}},
        {"id": "text", "messages": episode("multi_turn_long_context_3", text=True),
         "reference": {"task_id": "multi_turn_long_context_3"}},
        {"id": "wrong", "messages": episode("multi_turn_base_0", "skip_second_turn"),
         "reference": {"task_id": "multi_turn_base_0"}},
        {"id": "partial", "messages": episode("multi_turn_base_0", "skip_second_turn"),
         "reference": {"task_id": "multi_turn_base_0"}, "options": {"partial": True}},
        {"id": "inline", "messages": episode("multi_turn_miss_func_0"), "reference": inline},
        {"id": "unknown_task", "messages": episode("multi_turn_base_0"),
         "reference": {"task_id": "multi_turn_base_9999"}},
        {"id": "not_multi_turn", "messages": episode("multi_turn_base_0"), "reference": {"task_id": "simple_python_1"}},
        {"id": "bad_class", "messages": episode("multi_turn_base_0"),
         "reference": {"involved_classes": ["os"], "ground_truth": [[]]}},
        {"id": "no_messages", "response": "[cd(folder='document')]", "reference": {"task_id": "multi_turn_base_0"}},
        {"id": "hang", "messages": hang, "options": {"timeout_s": 3},
         "reference": {"involved_classes": ["MathAPI"], "ground_truth": [["mean(numbers=[1, 2])"]]}},
    ]
    for item in items:
        item["verifier"] = "bfcl_multi_turn"
    by_id = {r["id"]: r for r in server.verify(items)}
    assert (by_id["right"]["status"], by_id["right"]["score"]) == ("ok", 1.0)
    assert by_id["right"]["turn_scores"] == [1.0] * 4
    assert (by_id["text"]["status"], by_id["text"]["score"]) == ("ok", 1.0)
    wrong = by_id["wrong"]
    assert (wrong["score"], wrong["turn_scores"][:2]) == (0.0, [1.0, 0.0])
    per_message = wrong["details"]["assistant_turn_scores"]
    assert len(per_message) == sum(m["role"] == "assistant" for m in items[2]["messages"]) and 0.0 in per_message
    assert wrong["details"]["error_type"] == "multi_turn:empty_turn_model_response"
    assert by_id["partial"]["score"] == sum(wrong["turn_scores"]) / 4
    assert (by_id["inline"]["score"], len(by_id["inline"]["turn_scores"])) == (1.0, 5)
    for name in ("unknown_task", "not_multi_turn", "bad_class"):
        assert by_id[name]["status"] == "invalid_reference" and by_id[name]["score"] is None, by_id[name]
    assert by_id["no_messages"]["status"] == "no_answer"
    assert by_id["hang"]["status"] == "timeout" and by_id["hang"]["score"] is None
    # The server still serves after the worker that ran the hanging call was killed.
    again = server.verify([{**items[0], "id": "again"}])
    assert again[0]["score"] == 1.0


def test_irrelevance_option(server: LiveServer) -> None:
    """miss_func's held-out turn has no ground-truth call: BFCL's runner does not check it, the option does."""
    task = load_task("multi_turn_miss_func_0")
    turns: list[Any] = [[[model_call(task, c) for c in turn], "prose"] for turn in task.ground_truth]
    quiet = next(i for i, t in enumerate(task.ground_truth) if not t)
    turns[quiet] = [[("pwd", {})], "prose"]
    msgs = messages(EpisodeCase(task, "acts_on_quiet_turn", turns))
    items = [{"id": str(flag), "verifier": "bfcl_multi_turn", "messages": msgs,
              "reference": {"task_id": task.id}, "options": {"irrelevance": flag}} for flag in (False, True)]
    by_id = {r["id"]: r for r in server.verify(items)}
    assert by_id["False"]["score"] == 1.0
    assert by_id["True"]["score"] == 0.0
    assert by_id["True"]["turn_scores"][quiet] == 0.0
    assert by_id["True"]["details"]["error_type"] == "multi_turn:irrelevance_error:decoder_success"
