"""The lean verifier through the real reward-service server (uvicorn subprocess) pointed at the Kimina Lean server
double by the documented environment variables."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes.lean_server import FakeLeanServer, serve
from tests.support.server import LiveServer, run_server

KEY = "lean-http-key-5d1e"
REF = "theorem add_comm_real (a b : ℝ) : a + b = b + a := by sorry"
STATED = "theorem add_comm_real (a b : ℝ) : a + b = b + a := by\n"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLeanServer]:
    with serve(FakeLeanServer(api_key=KEY, latency_s=0.1)) as f:
        yield f


@pytest.fixture(scope="module")
def live(fake: FakeLeanServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {
        "REWARD_SERVICE_LEAN_SERVER_URL": fake.url,
        "REWARD_SERVICE_LEAN_API_KEY": KEY,
        "REWARD_SERVICE_LEAN_MAX_BATCH": "8",
        "REWARD_SERVICE_LEAN_TIMEOUT_S": "45",
        "REWARD_SERVICE_LOG_LEVEL": "DEBUG",
    }
    with run_server(tmp_path_factory.mktemp("lean"), env) as server:
        yield server


def test_a_mixed_batch_over_http(live: LiveServer, fake: FakeLeanServer) -> None:
    fake.reset()
    bodies = ["  ring", "  sorry", "  false_step", "  lib_admit", "  slow_tactic"]
    items = [{"id": str(i), "verifier": "lean", "response": f"```lean4\n{STATED}{bodies[i % 5]}\n```", "reference": REF}
             for i in range(20)]
    items.append({"verifier": "lean", "response": "ring", "reference": "not a theorem"})
    items.append({"verifier": "lean", "response": STATED.replace("b + a", "a + b") + "  rfl", "reference": REF})
    results = live.verify(items)
    expected = [("ok", 1.0), ("rejected", 0.0), ("ok", 0.0), ("rejected", 0.0), ("timeout", None)]
    assert [(r["status"], r["score"]) for r in results[:20]] == [expected[i % 5] for i in range(20)]
    assert results[1]["details"]["rule"] == "sorry" and "server" not in results[1]["reason"]
    assert results[3]["details"]["rule"] == "sorry" and "server reports a sorry" in results[3]["reason"]
    assert results[2]["details"]["rule"] == "lean_error"
    assert (results[20]["status"], results[21]["details"]["rule"]) == ("invalid_reference", "statement")
    # 16 snippets reached the double (4 were refused statically), in batches of at most 8, with the set time limit.
    assert sum(len(r["snippets"]) for r in fake.requests) == 16
    assert fake.calls == 2 and all(r["timeout"] == 45 for r in fake.requests)


def test_bad_option_is_a_422_and_the_key_is_never_logged(live: LiveServer, fake: FakeLeanServer) -> None:
    with live.client() as c:
        r = c.post("/v1/verify", json={"items": [{"verifier": "lean", "response": "ring", "reference": REF,
                                                  "options": {"lean_timeout_s": 0}}]})
        assert r.status_code == 422 and "lean_timeout_s" in r.text
        listed = c.get("/v1/verifiers").text
    assert "lean" in listed and KEY not in listed
    log = Path(live.log_path).read_text()
    assert "lean server" in log and KEY not in log


def test_server_without_lean_url_answers_unavailable(tmp_path: Path) -> None:
    with run_server(tmp_path, {"REWARD_SERVICE_WORKERS": "1"}) as server:
        results = server.verify([{"verifier": "lean", "response": "ring", "reference": REF}])
    assert results[0]["status"] == "unavailable" and "REWARD_SERVICE_LEAN_SERVER_URL" in results[0]["reason"]
