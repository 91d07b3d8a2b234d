"""How a trajectory is read into BFCL turns and steps: user messages that carry a prompt-mode step's results, tool
messages, structured calls whose arguments BFCL's decoder cannot read, unreadable steps skipped as BFCL skips them."""
from __future__ import annotations

from verifiers.kinds.bfcl.actions import read_message, split_turns
from verifiers.kinds.bfcl.verifier import BfclMultiTurnVerifier, judge_trajectory

OPTIONS = BfclMultiTurnVerifier().parse_options({})


def call(name: str, arguments: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def test_results_sent_back_as_a_user_message_do_not_open_a_turn() -> None:
    messages = [
        {"role": "system", "content": "tools..."},
        {"role": "user", "content": "go to document"},
        {"role": "assistant", "content": "[cd(folder='document')]"},
        {"role": "user", "content": "[\"{'current_working_directory': 'document'}\"]"},  # prompt mode's results
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "now list it"},
        call("ls", "{}"),
        {"role": "tool", "tool_call_id": "c", "content": "..."},
        {"role": "user", "content": "a third turn, right after a tool message"},
    ]
    turns = split_turns(messages, 10_000)
    assert [[pos for pos, _ in t] for t in turns.steps] == [[2, 4], [6], []]
    assert turns.result_messages == 1


def test_empty_argument_strings_are_unreadable_as_in_bfcl() -> None:
    assert read_message(call("pwd", ""), 10_000).error is not None
    assert read_message(call("pwd", "{}"), 10_000).runs
    assert read_message(call("cd", '{"folder": '), 10_000).error is not None


def test_an_unreadable_step_runs_nothing_and_the_next_one_runs() -> None:
    task = {"involved_classes": ["GorillaFileSystem"],
            "initial_config": {"GorillaFileSystem": {"root": {"w": {"type": "directory", "contents": {
                "d": {"type": "directory", "contents": {}}}}}}},
            "question": [[{"role": "user", "content": "enter d"}]], "ground_truth": [["cd(folder='d')"]]}
    messages = [{"role": "user", "content": "enter d"}, call("cd", '{"folder": "d"'), call("cd", '{"folder": "d"}'),
                {"role": "assistant", "content": "Done."}]
    verdict = judge_trajectory(messages, task, OPTIONS)
    assert verdict.score == 1.0 and verdict.details["unreadable_steps"][0]["turn"] == 0
    only_unreadable = messages[:2] + messages[3:]
    verdict = judge_trajectory(only_unreadable, task, OPTIONS)
    assert verdict.score == 0.0 and verdict.details["error_type"] == "multi_turn:empty_turn_model_response"
