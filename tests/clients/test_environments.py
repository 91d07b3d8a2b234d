"""reward_client.environments against instances that speak the environment routes' contract (tests/support/env_double,
real processes on loopback): sessions pinned to their instance, typed failures, capacity waits."""
from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from reward_client import RequestRejected, RetryPolicy
from reward_client.environments import AsyncEnvClient, EnvClient, observation_text
from reward_client.errors import EpisodeFailed, InfraError, SessionLost

from tests.support.env_double import calls, env_double

PATIENT = RetryPolicy(budget_s=300, base_delay_s=0.05, max_delay_s=0.5)


@pytest.fixture(scope="module")
def one() -> Iterator[str]:
    with env_double("solo") as (url, _):
        yield url


def test_an_episode_keeps_its_state_and_ends_with_the_final_answers_reward(one: str) -> None:
    with EnvClient(one, retry=PATIENT) as envs:
        session = envs.reset("python", seed=3, reward={"verifier": "exact_match", "reference": "42"}, db="x")
        assert session.session_id.startswith("solo.") and session.url == one
        assert envs.step(session, {"code": "x = 6 * 7"}).observation["stdout"] == ""
        assert envs.step(session, {"code": "print(x)"}).observation["stdout"] == "42\n"  # the same interpreter
        assert envs.state(session)["variables"] == ["x"]
        end = envs.step(session, {"final_answer": "42"})
        assert (end.done, end.reward, end.verdict["status"]) == (True, 1.0, "ok")
        assert session.done and session.reward == 1.0
        envs.close(session)
        assert envs.close(session) is None  # closed once; the second is a no-op
    [reset] = [c for c in calls(one) if c["call"] == "reset" and c["session_id"] == session.session_id]
    assert reset["body"] == {"seed": 3, "reward": {"verifier": "exact_match", "reference": "42"}, "db": "x"}


def test_closing_with_score_scores_an_episode_that_gave_no_answer(one: str) -> None:
    with EnvClient(one, retry=PATIENT) as envs:
        session = envs.reset("python", reward={"verifier": "exact_match", "reference": "1"})
        end = envs.close(session, score=True)
        assert end is not None and (end.reward, end.verdict["status"]) == (0.0, "no_answer")


def test_a_reaped_session_is_lost_and_stays_lost_without_further_requests(one: str) -> None:
    with EnvClient(one, retry=PATIENT) as envs:
        session = envs.reset("python")
        envs.close(session)
        session.closed = False  # as if the server had reaped it behind the client's back
        with pytest.raises(SessionLost, match="410"):
            envs.step(session, {"code": "1"})
        before = len(calls(one))
        with pytest.raises(SessionLost):
            envs.step(session, {"code": "1"})
        assert len(calls(one)) == before


def test_infra_error_is_typed_not_a_reward(one: str) -> None:
    with EnvClient(one, retry=PATIENT) as envs:
        session = envs.reset("python")
        with pytest.raises(InfraError, match="sandbox died") as err:
            envs.step(session, {"code": "INFRA"})
        assert err.value.code == "infra_error" and isinstance(err.value, EpisodeFailed)
        assert session.failure is err.value and session.reward is None


def test_bad_input_is_rejected_not_retried(one: str) -> None:
    with EnvClient(one, retry=PATIENT) as envs, pytest.raises(RequestRejected) as err:
        envs.reset("no_such_env")
    assert err.value.status_code == 404


def test_observation_text_shows_fields_and_hides_bookkeeping() -> None:
    assert observation_text({"session_id": "a", "stdout": "42\n", "error": ""}) == "stdout:\n42\n"
    assert observation_text({"text": "ready", "session_id": "a"}) == "ready"
    assert observation_text({"rows": [[1, "a"]], "verdict": {"score": 1}}) == 'rows: [[1, "a"]]'


def test_capacity_waits_for_a_free_slot_as_retry_after_asks() -> None:
    with env_double("full", capacity=1) as (url, _), EnvClient(url, retry=PATIENT) as envs:
        first = envs.reset("python")
        threading.Timer(1.5, lambda: envs.close(first)).start()
        started = time.monotonic()
        second = envs.reset("python")  # 429 capacity until the first session closes
        assert time.monotonic() - started >= 1.0 and second.session_id != first.session_id
        assert sum(c["call"] == "reset" for c in calls(url)) == 2  # the refused tries never reached a session


@pytest.fixture()
def two() -> Iterator[list[tuple[str, object]]]:
    with env_double("a") as a, env_double("b") as b:
        yield [a, b]


def test_sessions_spread_over_instances_and_each_stays_on_its_own(two) -> None:
    urls = [url for url, _ in two]
    with EnvClient(urls, retry=PATIENT) as envs:
        sessions = [envs.reset("python") for _ in range(6)]
        assert {s.url for s in sessions} == set(urls)
        for k, s in enumerate(sessions):
            envs.step(s, {"code": f"v = {k}"})
        for k, s in enumerate(sessions):
            assert envs.step(s, {"code": "print(v)"}).observation["stdout"] == f"{k}\n"
    for url, _ in two:
        mine = {s.session_id for s in sessions if s.url == url}
        stepped = {c["session_id"] for c in calls(url) if c["call"] == "step"}
        assert stepped == mine  # no call of a session ever went to the other instance


def test_a_killed_instance_loses_its_sessions_at_once_and_the_others_carry_on(two) -> None:
    (url_a, proc_a), (url_b, _) = two
    with EnvClient([url_a, url_b], retry=PATIENT) as envs:
        sessions = [envs.reset("python") for _ in range(4)]
        on_a = [s for s in sessions if s.url == url_a]
        on_b = [s for s in sessions if s.url == url_b]
        assert on_a and on_b
        os.kill(proc_a.pid, signal.SIGKILL)
        proc_a.wait(timeout=30)
        started = time.monotonic()
        for s in on_a:
            with pytest.raises(SessionLost) as err:
                envs.step(s, {"code": "1"})
            assert err.value.url == url_a and err.value.session_id == s.session_id
        assert time.monotonic() - started < 30  # not after the 300 s retry budget: no retry of a stateful call
        for s in on_b:
            assert envs.step(s, {"code": "print(7)"}).observation["stdout"] == "7\n"
        fresh = envs.reset("python")  # a new session goes where an instance still answers
        assert fresh.url == url_b


def test_a_hung_instance_holding_a_step_is_found_by_its_probe(one: str, tmp_path) -> None:
    with env_double("hung") as (url, proc):
        async def scenario() -> None:
            async with AsyncEnvClient(url, retry=PATIENT, timeout=600, stall_s=0.5) as envs:
                session = await envs.reset("python")
                os.kill(proc.pid, signal.SIGSTOP)  # a frozen process: connections stay open, nothing answers
                try:
                    started = time.monotonic()
                    with pytest.raises(SessionLost, match="readyz"):
                        await envs.step(session, {"code": "print(1)"})
                    assert time.monotonic() - started < 60  # the probe, not the 600 s read timeout
                finally:
                    os.kill(proc.pid, signal.SIGCONT)

        import asyncio

        asyncio.run(scenario())
