"""Judges through the real reward-service server (uvicorn subprocess) pointed at the fake OpenAI server by the
documented environment variables."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes.openai_server import FakeOpenAI, serve
from tests.support.judges import API_KEY
from tests.support.server import LiveServer, free_port, run_server


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with serve(FakeOpenAI(api_key=API_KEY, latency_s=0.2)) as f:
        yield f


@pytest.fixture(scope="module")
def live(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    down = {"kind": "openai", "base_url": f"http://127.0.0.1:{free_port()}/v1", "model": "m", "max_retries": 1}
    env = {
        "REWARD_SERVICE_JUDGE_BASE_URL": fake.url,
        "REWARD_SERVICE_JUDGE_MODEL": "judge-model",
        "REWARD_SERVICE_JUDGE_API_KEY": API_KEY,
        "REWARD_SERVICE_JUDGE_BACKENDS": json.dumps({"down": down}),
        "REWARD_SERVICE_JUDGE_BACKOFF_S": "0.01",
        "REWARD_SERVICE_JUDGE_REQUESTS_PER_MINUTE": "6000",
        "REWARD_SERVICE_LOG_LEVEL": "DEBUG",
    }
    with run_server(tmp_path_factory.mktemp("judges"), env) as server:
        yield server


def test_group_with_duplicates_over_http(live: LiveServer, fake: FakeOpenAI) -> None:
    fake.reset()
    answers = ["x = 7", "The answer is 7.", "x = 8", "x = 7", "x = 7", "x = 8", "The answer is 7.", "x = 7"]
    items = [{"id": str(i), "verifier": "judge_reference", "response": a, "reference": "7", "group": "g"}
             for i, a in enumerate(answers)]
    results = live.verify(items)
    assert [r["score"] for r in results] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    assert all(r["status"] == "ok" for r in results)
    assert fake.calls == 3
    assert fake.requests[0]["model"] == "judge-model"


def test_guard_hack_and_bad_item_do_not_sink_the_batch(live: LiveServer, fake: FakeOpenAI) -> None:
    fake.reset()
    results = live.verify([
        {"verifier": "judge_reference", "response": "Let's solve this problem step by step.", "reference": "7"},
        {"verifier": "rubric", "response": "Paris", "reference": "not a rubric"},
        {"verifier": "rubric", "response": "Paris is nice", "reference": [{"text": 'says "Paris"', "required": True}]},
    ])
    assert [(r["status"], r["score"]) for r in results] == [("rejected", 0.0), ("invalid_reference", None), ("ok", 1.0)]
    assert fake.calls == 1


def test_request_cannot_supply_a_url_but_can_pick_a_configured_backend(live: LiveServer, fake: FakeOpenAI) -> None:
    with live.client() as c:
        r = c.post("/v1/verify", json={"items": [{"verifier": "judge_reference", "response": "7", "reference": "7",
                                                  "options": {"base_url": "http://attacker.example/v1"}}]})
    assert r.status_code == 422 and "base_url" in r.text
    results = live.verify([
        {"verifier": "judge_reference", "response": "7", "reference": "7", "options": {"backend": "down"}},
        {"verifier": "judge_reference", "response": "7", "reference": "7", "options": {"backend": "elsewhere"}},
        {"verifier": "judge_reference", "response": "7", "reference": "7", "options": {"backend": "default"}},
    ])
    assert [r["status"] for r in results] == ["unavailable", "unavailable", "ok"]
    assert results[0]["score"] is None and results[1]["score"] is None
    assert "down" in results[1]["reason"] and "default" in results[1]["reason"]


def test_api_key_is_sent_but_never_logged(live: LiveServer, fake: FakeOpenAI) -> None:
    live.verify([{"verifier": "judge_reference", "response": "x is 9", "reference": "9"}])
    assert fake.calls >= 1
    log = Path(live.log_path).read_text()
    assert "judge backends" in log and API_KEY not in log
    with live.client() as c:
        listed = c.get("/v1/verifiers").text
    assert API_KEY not in listed and "judge_reference" in listed and "pairwise" in listed


def test_judge_rate_limits_in_metrics(live: LiveServer, fake: FakeOpenAI) -> None:
    fake.reset()
    results = live.verify([{"verifier": "judge_reference", "response": f"It is {i}.", "reference": str(i)}
                           for i in range(900, 903)])
    assert [r["status"] for r in results] == ["ok"] * 3
    with live.client() as c:
        text = c.get("/metrics").text
    values = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("reward_judge_")}
    assert values['reward_judge_limit_requests_per_minute{backend="default"}'] == 6000
    assert 'reward_judge_limit_requests_per_minute{backend="down"}' not in values  # no limit set, none shown
    assert values['reward_judge_requests_total{backend="default"}'] >= 3
    assert values['reward_judge_queue_depth{backend="default"}'] == 0


def test_generative_prm_over_http_names_an_off_format_critique(live: LiveServer, fake: FakeOpenAI) -> None:
    """The double here is a verdict judge, not a step critic: its answer has no step verdicts, which is an error
    with the reason, never a score."""
    fake.reset()
    [result] = live.verify([{"verifier": "generative_prm", "response": "2 + 2 = 4.\n\nSo the answer is 4.",
                             "reference": {"problem": "What is 2 + 2?"}}])
    assert result["status"] == "error" and result["score"] is None
    assert "neither format" in result["reason"] and fake.calls == 1
    with live.client() as c:
        names = [v["name"] for v in c.get("/v1/verifiers").json()["verifiers"]]
    assert "generative_prm" in names
