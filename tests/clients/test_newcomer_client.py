"""The client against real servers on 127.0.0.1: one never started (a plain answer within seconds), and one lost
after it answered, then restarted (ridden out, told in the log at once and while waiting)."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reward_client import AsyncRewardClient, RetryPolicy, RewardClient, ServiceUnavailable, ServiceUnreachable, protocol
from reward_client.retry import trainer_policy

from tests.support.live_restart import Restarter
from tests.support.server import free_port


@pytest.fixture()
def nothing_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the URLs earlier tests reached (a free port may be one a finished server used)."""
    monkeypatch.setattr(protocol, "_reached", set())


@pytest.mark.timeout(60)
def test_a_server_never_started_is_named_within_seconds(nothing_reached: None,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="reward_client"), RewardClient(url) as client:  # default policy
        with pytest.raises(ServiceUnreachable) as info:
            client.verify_one("exact_match", "a", "a")
    assert time.monotonic() - started < 15
    message = str(info.value)
    assert f"cannot reach {url}: is the service running?" in message
    assert "REWARD_CLIENT_URL" in message and "REWARD_CLIENT_FIRST_CONTACT_S" in message
    assert isinstance(info.value, ServiceUnavailable)  # an outage handler catches it too
    assert any(f"no answer from {url} yet" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(60)
def test_async_client_and_a_url_without_scheme_fail_fast(nothing_reached: None) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    async def go(base: str) -> None:
        async with AsyncRewardClient(base) as client:
            await client.verify_one("exact_match", "a", "a")

    started = time.monotonic()
    with pytest.raises(ServiceUnreachable, match="is the service running"):
        asyncio.run(go(url))
    assert time.monotonic() - started < 15
    started = time.monotonic()
    with pytest.raises(ServiceUnreachable, match="a URL starts with http:// or https://"):
        asyncio.run(go("localhost:8000"))
    assert time.monotonic() - started < 2


def test_trainer_policy_waits_for_a_first_contact_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REWARD_CLIENT_FIRST_CONTACT_S", raising=False)
    assert trainer_policy().first_contact_window() == trainer_policy().budget_s
    assert trainer_policy(600).first_contact_window() == 600
    assert RetryPolicy().first_contact_window() == 5.0
    monkeypatch.setenv("REWARD_CLIENT_FIRST_CONTACT_S", "30")
    assert trainer_policy().first_contact_window() == 30 and RetryPolicy().first_contact_window() == 30


@pytest.fixture()
def restarter(tmp_path: Path) -> Iterator[Restarter]:
    server = Restarter(tmp_path)
    yield server
    server.stop()


@pytest.mark.timeout(300)
def test_a_server_lost_after_it_answered_is_ridden_out_and_told(restarter: Restarter,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    restarter.start()
    # retries at least every 0.5 s, so the 4 s outage holds several: the test is about what the log says, not backoff
    policy = RetryPolicy(budget_s=120, notice_every_s=1.0, max_delay_s=0.5)
    with caplog.at_level(logging.INFO, logger="reward_client"), RewardClient(restarter.url, retry=policy) as client:
        assert client.verify_one("exact_match", "x", "x").score == 1.0
        restarter.stop()
        stopped = time.monotonic()
        restart = threading.Timer(4.0, restarter.start)
        restart.start()
        try:
            assert client.scores("exact_match", ["a", "b"], ["a", "a"]) == [1.0, 0.0]
        finally:
            restart.join()
    lines = [(r.created, r.getMessage()) for r in caplog.records if r.name == "reward_client"]
    lost = [t for t, m in lines if m.startswith(f"lost contact with {restarter.url}")]
    assert len(lost) == 1, lines
    wall_stopped = time.time() - (time.monotonic() - stopped)
    assert lost[0] - wall_stopped < 2.0, "the warning comes at the first failure, not at the end of the wait"
    assert sum(m.startswith(f"still no answer from {restarter.url}") for _, m in lines) >= 2, lines
    assert any(m.startswith(f"{restarter.url} answers again after") for _, m in lines), lines
