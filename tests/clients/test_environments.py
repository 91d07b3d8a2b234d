"""reward_client.environments against the real server's environment routes (python and sql sessions on loopback):
episodes and rewards, sessions pinned to the instance that holds them, typed failures when an instance dies or
hangs, capacity waits."""
from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from reward_client import RequestRejected, RetryPolicy
from reward_client.environments import AsyncEnvClient, EnvClient, observation_text
from reward_client.errors import EpisodeFailed, InfraError, SessionLost

from tests.support.client import script
from tests.support.server import LiveServer, run_env_server

PATIENT = RetryPolicy(budget_s=300, base_delay_s=0.05, max_delay_s=0.5)
EXACT = {"verifier": "exact_match", "reference": "42"}


def test_a_python_episode_keeps_its_state_and_ends_with_the_final_answers_reward(env_server: LiveServer) -> None:
    with EnvClient(env_server.url, retry=PATIENT) as envs:
        session = envs.reset("python", seed=3, reward=EXACT, prompt="What is 6 times 7?")
        assert session.url == env_server.url and session.observation["session_id"] == session.session_id
        assert envs.step(session, {"code": "x = 6 * 7\nx"}).observation["value"] == "42"
        printed = envs.step(session, {"code": "print(x)"})  # the same interpreter
        assert printed.observation["stdout"] == "42\n" and observation_text(printed.observation) == "stdout:\n42\n"
        assert envs.state(session)["step_count"] == 2
        end = envs.step(session, {"final_answer": "42"})
        assert (end.done, end.reward, end.verdict["status"]) == (True, 1.0, "ok")
        assert session.done and session.reward == 1.0
        closed = envs.close(session)
        assert closed is not None and closed.reward == 1.0  # the close of a scored episode repeats its verdict
        assert envs.close(session) is None  # closed once; the second is a no-op


def test_a_sql_episode_and_a_wrong_answer(env_server: LiveServer) -> None:
    with EnvClient(env_server.url, retry=PATIENT) as envs:
        session = envs.reset("sql", database="concert_singer", reward={"verifier": "exact_match", "reference": "6"})
        assert "singer" in observation_text(session.observation)  # the first observation lists the tables
        rows = envs.step(session, {"query": "SELECT count(*) FROM singer"}).observation["rows"]
        end = envs.step(session, {"final_answer": str(rows[0][0] + 1)})
        assert end.done and end.reward == 0.0 and end.verdict["status"] == "ok"
        envs.close(session)


def test_closing_with_score_scores_an_episode_that_gave_no_answer(env_server: LiveServer) -> None:
    with EnvClient(env_server.url, retry=PATIENT) as envs:
        session = envs.reset("python", reward=EXACT)
        envs.step(session, {"code": "print(42)"})
        end = envs.close(session, score=True)
        assert end is not None and end.reward == 0.0 and end.verdict["status"] != "ok"


def test_a_session_closed_behind_the_clients_back_is_lost_and_stays_lost(env_server: LiveServer) -> None:
    with EnvClient(env_server.url, retry=PATIENT) as envs:
        session = envs.reset("python")
        httpx.post(f"{env_server.url}/envs/python/close", json={"session_id": session.session_id}).raise_for_status()
        with pytest.raises(SessionLost, match="410") as first:
            envs.step(session, {"code": "1"})
        assert isinstance(first.value, EpisodeFailed) and session.failure is first.value
        with pytest.raises(SessionLost) as again:
            envs.step(session, {"code": "1"})
        assert again.value is first.value  # raised from the session's record: no second request


def test_bad_input_is_rejected_not_retried(env_server: LiveServer) -> None:
    with EnvClient(env_server.url, retry=PATIENT) as envs:
        with pytest.raises(RequestRejected) as unknown:
            envs.reset("no_such_env")
        assert unknown.value.status_code == 404
        with pytest.raises(RequestRejected, match="db_typo"):
            envs.reset("sql", database="concert_singer", db_typo="x")
        session = envs.reset("python")
        with pytest.raises(RequestRejected) as bad:
            envs.step(session, {"cell": "1"})
        assert bad.value.status_code == 422 and session.failure is None  # the session goes on
        envs.close(session)


def test_observation_text_shows_what_the_model_needs() -> None:
    failed = {"status": "error", "stdout": "", "exception": {"type": "ValueError", "message": "no",
                                                            "traceback": "Traceback ...\nValueError: no"},
              "wall_ms": 1.2, "truncated": False, "session_id": "a"}
    assert observation_text(failed) == "status: error\nexception:\nTraceback ...\nValueError: no"
    assert observation_text({"status": "ok", "stdout": "", "value": None, "session_id": "a"}) == "(no output)"
    assert observation_text({"text": "ready", "session_id": "a"}) == "ready"
    assert observation_text({"columns": ["n"], "rows": [[1]], "elapsed_ms": 3}) == 'columns: ["n"]\nrows: [[1]]'


def test_infra_error_and_a_refused_step_are_told_apart(scripted: str) -> None:
    """Failures a real session cannot be made to show on demand, from the scripted server: 503 ``infra_error`` is
    typed and sticky, a 429 on a step is waited out (the step was not run)."""
    with EnvClient(scripted, retry=PATIENT) as envs:
        session = envs.reset("python")
        script(scripted, [{"status": 429, "retry_after": "0.2", "code": "capacity"}])
        assert envs.step(session, {"code": "1"}).observation == {"status": "ok"}
        script(scripted, [{"status": 503, "code": "infra_error", "detail": "the sandbox could not start"}])
        with pytest.raises(InfraError, match="sandbox could not start") as err:
            envs.step(session, {"code": "1"})
        assert err.value.code == "infra_error" and session.failure is err.value and session.reward is None


def test_capacity_waits_for_a_free_slot_as_retry_after_asks_behind_a_token(tmp_path) -> None:
    env = {"REWARD_SERVICE_ENV_MAX_SESSIONS_PER_CLIENT": "1", "REWARD_SERVICE_AUTH_TOKEN": "tok"}
    with run_env_server(tmp_path, env) as live, EnvClient(live.url, retry=PATIENT, token="tok") as envs:
        with EnvClient(live.url, retry=PATIENT) as anonymous, pytest.raises(RequestRejected) as refused:
            anonymous.reset("python")
        assert refused.value.status_code == 401
        first = envs.reset("python")
        threading.Timer(1.5, lambda: envs.close(first)).start()
        started = time.monotonic()
        second = envs.reset("python")  # 429 capacity until the first session closes
        assert time.monotonic() - started >= 1.0 and second.session_id != first.session_id
        envs.close(second)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LiveServer]]:
    """Two instances; the kill test, the last to use them, SIGKILLs the first."""
    with run_env_server(tmp_path_factory.mktemp("a")) as a, run_env_server(tmp_path_factory.mktemp("b")) as b:
        yield [a, b]


def test_sessions_spread_over_instances_and_each_stays_on_its_own(two: list[LiveServer]) -> None:
    urls = [s.url for s in two]
    with EnvClient(urls, retry=PATIENT) as envs:
        sessions = [envs.reset("python") for _ in range(4)]
        assert {s.url for s in sessions} == set(urls)
        for k, s in enumerate(sessions):
            envs.step(s, {"code": f"v = {k}"})
        for k, s in enumerate(sessions):  # an instance answers session_lost for a session it does not hold
            assert envs.step(s, {"code": "print(v)"}).observation["stdout"] == f"{k}\n"
        for s in sessions:
            envs.close(s)


def test_a_killed_instance_loses_its_sessions_at_once_and_the_others_carry_on(two: list[LiveServer]) -> None:
    a, b = two
    with EnvClient([a.url, b.url], retry=PATIENT) as envs:
        sessions = [envs.reset("python") for _ in range(4)]
        on_a = [s for s in sessions if s.url == a.url]
        on_b = [s for s in sessions if s.url == b.url]
        assert on_a and on_b
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait(timeout=30)
        started = time.monotonic()
        for s in on_a:
            with pytest.raises(SessionLost) as err:
                envs.step(s, {"code": "1"})
            assert err.value.url == a.url and err.value.session_id == s.session_id
        assert time.monotonic() - started < 30  # not after the 300 s retry budget: a stateful call is not retried
        for s in on_b:
            assert envs.step(s, {"code": "print(7)"}).observation["stdout"] == "7\n"
        fresh = envs.reset("python")  # a new session goes where an instance still answers
        assert fresh.url == b.url


def test_a_hung_instance_holding_a_step_is_found_by_its_probe(tmp_path) -> None:
    with run_env_server(tmp_path) as live:
        async def scenario() -> None:
            async with AsyncEnvClient(live.url, retry=PATIENT, timeout=600, stall_s=0.5) as envs:
                session = await envs.reset("python")
                os.kill(live.proc.pid, signal.SIGSTOP)  # a frozen process: its sockets stay open, nothing answers
                try:
                    started = time.monotonic()
                    with pytest.raises(SessionLost, match="readyz"):
                        await envs.step(session, {"code": "print(1)"})
                    assert time.monotonic() - started < 60  # the probe, not the 600 s read timeout
                finally:
                    os.kill(live.proc.pid, signal.SIGCONT)

        asyncio.run(scenario())
