"""The ``bfcl`` environment on a real server: live episodes fed the calls of the agreement episodes
(tests/support/bfcl_episodes.py) reach bfcl-eval's own checker's verdict and the ``bfcl_multi_turn`` verifier's,
turn scores included; turns open with BFCL's docs (miss_func's held-out function appears at its turn); a call that
runs past the step's time limit fails without ending the session; hostile calls run nothing."""
from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import httpx
import pytest

from tests.support.bfcl_episodes import EpisodeCase, Oracle, action, as_inference, cases, messages, model_call
from tests.support.server import LiveServer
from verifiers.kinds.bfcl import source
from verifiers.kinds.bfcl.source import CATEGORIES, load_task
from verifiers.kinds.bfcl.verifier import BfclMultiTurnVerifier, judge_trajectory

pytestmark = pytest.mark.skipif(not source.available(), reason="bfcl-eval is not installed "
                                "(scripts/setup.sh: pip install --no-deps bfcl-eval)")
OPTIONS = BfclMultiTurnVerifier().parse_options({})


def reset(c: httpx.Client, **body: Any) -> dict[str, Any]:
    r = c.post("/envs/bfcl/reset", json=body)
    assert r.status_code == 200, r.text
    obs: dict[str, Any] = r.json()["observation"]
    return obs


def step(c: httpx.Client, sid: str, act: dict[str, Any], **extra: Any) -> dict[str, Any]:
    r = c.post("/envs/bfcl/step", json={"session_id": sid, "action": act, **extra})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def play(c: httpx.Client, case: EpisodeCase) -> dict[str, Any]:
    """Drive one live session with the case's steps, turn by turn, as an agent loop would."""
    sid = reset(c, task_id=case.task.id)["session_id"]
    out: dict[str, Any] = {}
    n = 0
    for steps in case.turns:
        for s in steps:
            n += 1
            out = step(c, sid, action(s, case.text, n))
            if out["done"] or out["observation"]["status"] != "results":
                break
        if out.get("done"):
            break
    c.post("/envs/bfcl/close", json={"session_id": sid})
    return out


def test_live_sessions_agree_with_bfcl_eval_and_the_verifier(env_server: LiveServer) -> None:
    oracle = Oracle()
    picked = [c for c in cases(CATEGORIES, per_category=1, seed=5) if c.mutation != "missing_last_turn"]
    agree = 0
    with env_server.client() as c:
        for case in picked:
            played = as_inference(case)
            out = play(c, case)
            assert out["done"] is True, case.name
            want = oracle.verdict(played, per_turn=False)
            verdict = judge_trajectory(messages(played), {"task_id": case.task.id}, OPTIONS)
            live = (out["reward"] == 1.0, out["observation"]["turn_scores"])
            agree += live == (want.valid, verdict.turn_scores) and (verdict.score == 1.0) == want.valid
    assert agree / len(picked) >= 0.99, (agree, len(picked))
    assert len(picked) >= 40


def test_turns_open_with_bfcls_docs_and_partial_reward(env_server: LiveServer) -> None:
    task = load_task("multi_turn_miss_func_0")
    held_turn, held = next((int(t), names) for t, names in task.missed_function.items())
    with env_server.client() as c:
        obs = reset(c, task_id=task.id, partial=True)
        sid = obs["session_id"]
        assert obs["status"] == "turn_started" and obs["messages"] == task.question[0]
        offered = {t["function"]["name"] for t in obs["tools"]}
        assert not offered & set(held) and "cd" in offered
        for turn, calls in enumerate(task.ground_truth):
            if turn == held_turn:
                assert obs["added_functions"] == held and set(held) <= {t["function"]["name"] for t in obs["tools"]}
            if turn == 1:  # the second turn left undone: it fails, the others pass
                calls = []
            for call in calls:
                name, args = model_call(task, call)
                out = step(c, sid, {"tool_calls": [{"name": name, "arguments": args}]})
                assert out["observation"]["status"] == "results"
                assert not out["observation"]["results"][0]["result"].startswith("Error during execution")
            out = step(c, sid, {"content": "Done.", "end_turn": True})
            obs = out["observation"]
        assert out["done"] is True
        scores = obs["turn_scores"]
        assert scores[1] == 0.0 and scores[0] == 1.0 and out["reward"] == pytest.approx(sum(scores) / len(scores))
        state = c.get("/envs/bfcl/state", params={"session_id": sid}).json()
        assert state["done"] is True and state["turn_scores"] == scores


def test_a_call_past_the_time_limit_fails_and_the_session_goes_on(env_server: LiveServer) -> None:
    task = {"id": "inline_math", "involved_classes": ["MathAPI", "GorillaFileSystem"],
            "initial_config": {"GorillaFileSystem": {"root": {"workspace": {"type": "directory", "contents": {}}}}},
            "question": [[{"role": "user", "content": "Make a folder, then add 2 and 3."}]],
            "ground_truth": [["mkdir(dir_name='reports')", "add(a=2, b=3)"]]}
    with env_server.client() as c:
        sid = reset(c, **task)["session_id"]
        made = step(c, sid, {"tool_calls": [{"name": "mkdir", "arguments": {"dir_name": "reports"}}]})
        assert made["observation"]["results"][0]["result"] == "None"
        hung = step(c, sid, {"content": "[power(base=10, exponent=1000000000)]"}, timeout_s=2)
        assert "ran past the step's time limit" in hung["observation"]["results"][0]["result"]
        hostile = step(c, sid, {"content": "[__import__(name='os'), _load_scenario(scenario={})]"})
        assert all(r["result"].startswith("Error during execution: name ") for r in hostile["observation"]["results"])
        added = step(c, sid, {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]})
        assert added["observation"]["results"][0]["result"] == '{"result": 5}'
        # the folder made before the worker was replaced is still there: the episode was rebuilt by replay
        assert step(c, sid, {"tool_calls": [{"name": "ls", "arguments": {}}]})["observation"]["results"][0][
            "result"] == '{"current_directory_content": ["reports"]}'
        end = step(c, sid, {"end_turn": True})
        assert end["done"] is True and end["reward"] == 1.0


def test_openenv_validator_and_a_bare_reset(env_server: LiveServer) -> None:
    """OpenEnv's own validator passes on /envs/bfcl; a reset naming no task draws a multi_turn_base task by seed."""
    validation = pytest.importorskip("openenv.cli._validation", reason="the environments extra is not installed")
    report = validation.validate_running_environment(f"{env_server.url}/envs/bfcl")
    assert report["passed"], report["criteria"]
    with env_server.client() as c:
        assert reset(c)["task_id"] == "multi_turn_base_0"
        assert reset(c, seed=3)["task_id"] == "multi_turn_base_3"


def test_bad_tasks_are_named(env_server: LiveServer) -> None:
    with env_server.client() as c:
        r = c.post("/envs/bfcl/reset", json={"task_id": "multi_turn_base_99999"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "task_id"
        r = c.post("/envs/bfcl/reset", json={"involved_classes": ["os"], "ground_truth": [[]]})
        assert r.status_code == 422
        r = c.post("/envs/bfcl/reset", json={"task_id": "multi_turn_base_0", "unknown": 1})
        assert r.status_code == 422


def test_a_worker_killed_under_a_session_is_rebuilt_by_replay() -> None:
    """Whatever ends a session's worker (here SIGKILL from outside) costs the step it was running, not the episode."""
    from environments.base import EnvResources
    from environments.kinds.bfcl import BfclAction, BfclEnvironment, BfclTask

    async def run() -> None:
        env = BfclEnvironment(EnvResources())
        try:
            await env.reset(BfclTask(task_id="multi_turn_base_0"), None)
            first = await env.step(BfclAction(tool_calls=[{"name": "cd", "arguments": {"folder": "document"}}]), 30)
            assert first.observation["results"][0]["result"] == '{"current_working_directory": "document"}'
            assert env._worker.proc is not None
            os.kill(env._worker.proc.pid, signal.SIGKILL)
            await asyncio.sleep(0.2)
            lost = await env.step(BfclAction(tool_calls=[{"name": "mkdir", "arguments": {"dir_name": "x"}}]), 30)
            assert lost.observation["results"][0]["result"].startswith("Error during execution: the call ended")
            # the cd before the kill was replayed into the new worker; the lost mkdir never happened
            ls = await env.step(BfclAction(tool_calls=[{"name": "ls", "arguments": {}}]), 30)
            assert ls.observation["results"][0]["result"] == \
                '{"current_directory_content": ["final_report.pdf", "previous_report.pdf"]}'
        finally:
            await env.close()

    asyncio.run(run())
