"""The labelled audit reads trajectories (a ``messages`` field instead of ``response``): the verifier scores the
final assistant turn, a verifier that reads the conversation gets it, and malformed trajectory rows are refused."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from verifiers.audit.labelled import labelled_audit
from verifiers.audit.rows import AuditInputError
from verifiers.engine import Engine
from verifiers.engine.registry import build_registry


def chat(*answers: str) -> list[dict[str, Any]]:
    """A user question and the model's turns, a nudge from the user between them."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is 7 * 6?"}]
    for k, answer in enumerate(answers):
        if k:
            messages.append({"role": "user", "content": "Are you sure?"})
        messages.append({"role": "assistant", "content": answer})
    return messages


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(build_registry(["tests.support.plugins.testing_verifiers"]))


def test_labelled_audit_of_trajectories_scores_final_turns(engine: Engine) -> None:
    rows = [
        {"id": "fixed", "messages": chat("\\boxed{41}", "Sorry: \\boxed{42}"), "reference": "42", "label": True},
        {"id": "broke", "messages": chat("\\boxed{42}", "Then \\boxed{41}"), "reference": "42", "label": False},
        {"id": "plain", "response": "\\boxed{42}", "reference": "42", "label": True},
        {"id": "labelled-wrong", "messages": chat("\\boxed{42}"), "reference": "42", "label": False},
    ]
    report = asyncio.run(labelled_audit(engine, "math", rows))
    assert report["confusion"] == {"tp": 2, "fp": 1, "tn": 1, "fn": 0}, report
    [fp] = report["disagreements"]
    assert fp["id"] == "labelled-wrong" and fp["response"] == "\\boxed{42}"


def test_labelled_audit_hands_the_conversation_to_the_verifier(engine: Engine) -> None:
    tool_turn = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]}
    rows = [{"messages": [*chat("let me check"), tool_turn], "label": True}]
    report = asyncio.run(labelled_audit(engine, "test_turns", rows))
    assert report["confusion"]["tp"] == 1, report  # 0.5: one of its two assistant turns made a call


@pytest.mark.parametrize("row, message", [
    ({"messages": chat("1"), "response": "1", "label": 1}, "give exactly one of response"),
    ({"reference": "1", "label": 1}, "give exactly one of response"),
    ({"messages": "hello", "label": 1}, "messages must be a non-empty list"),
    ({"messages": [], "label": 1}, "messages must be a non-empty list"),
    ({"messages": ["hi"], "label": 1}, "messages must be a non-empty list"),
])
def test_malformed_trajectory_rows_are_refused(engine: Engine, row: dict[str, Any], message: str) -> None:
    with pytest.raises(AuditInputError, match=f"row 0: {message}"):
        asyncio.run(labelled_audit(engine, "math", [row]))


def test_the_audit_route_applies_the_trajectory_rules_and_limits(tmp_path) -> None:
    from tests.support.server import run_server

    good = {"messages": chat("\\boxed{42}"), "reference": "42", "label": True}
    orphan = {"messages": [*chat("x"), {"role": "tool", "tool_call_id": "nope", "content": "1"}], "reference": "42",
              "label": False}
    with run_server(tmp_path, {"REWARD_SERVICE_MAX_MESSAGES": "4", "REWARD_SERVICE_WORKERS": "1"}) as live, \
            live.client() as client:
        def audit(rows: list[dict[str, Any]]) -> Any:
            return client.post("/v1/audit", json={"kind": "labelled", "verifier": "math", "items": rows})

        ok = audit([good])
        assert ok.status_code == 200 and ok.json()["confusion"]["tp"] == 1, ok.text
        bad_role = audit([good, {**good, "messages": [{"role": "robot", "content": "1"}]}])
        assert bad_role.status_code == 422 and bad_role.json()["loc"][:3] == ["items", 1, "messages"], bad_role.text
        r = audit([good, orphan])
        assert r.status_code == 422 and r.json()["loc"] == ["items", 1, "messages", 2, "tool_call_id"], r.text
        long = audit([{**good, "messages": chat("1", "2", "3")}])  # 5 messages, over the limit of 4
        assert long.status_code == 422 and "over the limit of 4" in long.json()["detail"], long.text
