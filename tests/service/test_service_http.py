"""The service over real HTTP: statuses, input errors, deadlines, saturation, auth, concurrency, ops endpoints."""
from __future__ import annotations

import concurrent.futures
import json
import time
from pathlib import Path

import httpx
import pytest

from tests.support.server import LiveServer, run_server


def verify(server: LiveServer, items: list[dict], **kw: object) -> httpx.Response:
    with server.client() as c:
        return c.post("/v1/verify", json={"items": items}, **kw)


def test_mixed_batch_keeps_order_and_every_status(server: LiveServer) -> None:
    items = [
        {"id": "ok1", "verifier": "exact_match", "response": " Paris ", "reference": "paris"},
        {"id": "wrong", "verifier": "exact_match", "response": "Lyon", "reference": "paris"},
        {"id": "empty", "verifier": "exact_match", "response": "   ", "reference": "paris"},
        {"id": "hedge", "verifier": "multiple_choice", "response": "Answer: A. Final answer: B", "reference": "B"},
        {"id": "badref", "verifier": "regex", "response": "abc", "reference": "(unclosed"},
        {"id": "slow", "verifier": "test_hang", "response": "x", "options": {"timeout_s": 0.5}},
        {"id": "bug", "verifier": "test_raise", "response": "x"},
        {"id": "down", "verifier": "test_down", "response": "x"},
        {"id": "mc", "verifier": "multiple_choice", "response": "so the answer is (C)", "reference": "C"},
    ]
    r = verify(server, items)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["id"] for x in results] == [i["id"] for i in items]
    by_id = {x["id"]: x for x in results}
    expect = {
        "ok1": ("ok", 1.0), "wrong": ("ok", 0.0), "empty": ("no_answer", 0.0), "hedge": ("rejected", 0.0),
        "badref": ("invalid_reference", None), "slow": ("timeout", None), "bug": ("error", None),
        "down": ("unavailable", None), "mc": ("ok", 1.0),
    }
    for key, (status, score) in expect.items():
        assert (by_id[key]["status"], by_id[key]["score"]) == (status, score), by_id[key]
        assert by_id[key]["reason"]
        assert by_id[key]["elapsed_ms"] >= 0
    assert "Traceback" not in r.text
    assert "boom from a buggy verifier" in by_id["bug"]["reason"]


def test_hung_verifier_is_killed_and_server_keeps_serving(server: LiveServer) -> None:
    r = verify(server, [{"verifier": "test_hang", "response": "x", "options": {"timeout_s": 0.3}}])
    assert r.json()["results"][0]["status"] == "timeout"
    # Both workers get replaced over time; the next requests still succeed.
    for _ in range(3):
        r = verify(server, [{"verifier": "exact_match", "response": "a", "reference": "a"}] * 4)
        assert [x["score"] for x in r.json()["results"]] == [1.0] * 4


def test_crashing_worker_is_an_error_not_a_zero(server: LiveServer) -> None:
    r = verify(server, [{"verifier": "test_crash", "response": "x"}, {"verifier": "test_print", "response": "x"}])
    crash, printed = r.json()["results"]
    assert crash["status"] == "error" and crash["score"] is None
    assert "died" in crash["reason"]
    assert printed["status"] == "ok" and printed["score"] == 1.0


def test_bad_json_is_400(server: LiveServer) -> None:
    with server.client() as c:
        r = c.post("/v1/verify", content=b'{"items": [', headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert "JSON" in r.json()["detail"]


def test_unknown_verifier_is_422_and_names_it(server: LiveServer) -> None:
    r = verify(server, [{"verifier": "exact_match", "response": "a", "reference": "a"},
                        {"verifier": "no_such_thing", "response": "a"}])
    assert r.status_code == 422
    body = r.json()
    assert "no_such_thing" in body["detail"] and "items[1]" in body["detail"]
    assert "exact_match" in body["detail"]  # the known names help the caller fix it
    assert body["loc"] == ["items", 1, "verifier"]


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ({"items": [{"verifier": "exact_match", "response": 5, "reference": "5"}]}, "items.0.response"),
        ({"items": [{"verifier": "exact_match"}]}, "items.0: Value error, give exactly one of response"),
        ({"items": "nope"}, "items"),
        ({"items": [{"verifier": "exact_match", "response": "a", "refrence": "a"}]}, "refrence"),
        ({}, "items"),
    ],
)
def test_wrong_types_are_422_with_location(server: LiveServer, payload: dict, fragment: str) -> None:
    with server.client() as c:
        r = c.post("/v1/verify", json=payload)
    assert r.status_code == 422, r.text
    assert fragment in r.json()["detail"]
    assert "Traceback" not in r.text


def test_bad_options_are_422(server: LiveServer) -> None:
    r = verify(server, [{"verifier": "exact_match", "response": "a", "reference": "a", "options": {"ignore_cse": 1}}])
    assert r.status_code == 422
    assert "ignore_cse" in r.json()["detail"]
    r = verify(server, [{"verifier": "exact_match", "response": "a", "reference": "a", "options": {"timeout_s": -1}}])
    assert r.status_code == 422


def test_empty_batch_is_422(server: LiveServer) -> None:
    r = verify(server, [])
    assert r.status_code == 422
    assert "at least one item" in r.json()["detail"]


def test_limits_give_413(tmp_path: Path) -> None:
    env = {
        "REWARD_SERVICE_MAX_BATCH_ITEMS": "3",
        "REWARD_SERVICE_MAX_RESPONSE_CHARS": "100",
        "REWARD_SERVICE_MAX_BODY_BYTES": "4096",
        "REWARD_SERVICE_WORKERS": "1",
    }
    with run_server(tmp_path, env) as live:
        item = {"verifier": "exact_match", "response": "a", "reference": "a"}
        r = verify(live, [item] * 4)
        assert r.status_code == 413 and "limit of 3" in r.json()["detail"]
        r = verify(live, [{**item, "response": "x" * 101}])
        assert r.status_code == 413 and "items[0].response" in r.json()["detail"]
        r = verify(live, [{**item, "reference": "y" * 5000}])
        assert r.status_code == 413 and "4096 bytes" in r.json()["detail"]
        # Chunked upload with no Content-Length is cut off too.
        body = json.dumps({"items": [{**item, "reference": "z" * 8000}]}).encode()
        with live.client() as c:
            r = c.post("/v1/verify", content=iter([body[:2000], body[2000:]]),
                       headers={"content-type": "application/json"})
        assert r.status_code == 413
        r = verify(live, [item] * 3)
        assert r.status_code == 200


def test_auth_on(tmp_path: Path) -> None:
    with run_server(tmp_path, {"REWARD_SERVICE_AUTH_TOKEN": "s3cret-token", "REWARD_SERVICE_WORKERS": "1"}) as live:
        item = [{"verifier": "exact_match", "response": "a", "reference": "a"}]
        assert verify(live, item).status_code == 401
        assert verify(live, item, headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = verify(live, item, headers={"Authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200 and ok.json()["results"][0]["score"] == 1.0
        with live.client() as c:
            assert c.get("/v1/verifiers").status_code == 401
            assert c.get("/healthz").status_code == 200  # probes stay open
        assert "s3cret-token" not in live.log()


def test_auth_off_by_default(server: LiveServer) -> None:
    with server.client() as c:
        assert c.get("/v1/verifiers").status_code == 200


def test_saturation_answers_429_then_recovers(tmp_path: Path) -> None:
    env = {"REWARD_SERVICE_MAX_PENDING_ITEMS": "4", "REWARD_SERVICE_MAX_BATCH_ITEMS": "4",
           "REWARD_SERVICE_WORKERS": "1"}
    with run_server(tmp_path, env) as live:
        slow = [{"verifier": "test_sleep", "response": "x", "options": {"seconds": 0.4}}] * 4

        def call(items: list[dict]) -> httpx.Response:
            return verify(live, items)

        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            first = ex.submit(call, slow)
            time.sleep(0.3)  # let the first request be admitted
            later = [ex.submit(call, slow[:1]) for _ in range(3)]
            codes = [f.result().status_code for f in later]
            assert first.result().status_code == 200
        refused = [c for c in codes if c == 429]
        assert refused, codes
        r = call(slow[:2])
        assert r.status_code == 200  # recovered once the backlog drained
        with live.client() as c:
            text = c.get("/metrics").text
        assert 'reward_admission_rejected_total{reason="saturated"}' in text


def test_429_carries_retry_after(tmp_path: Path) -> None:
    env = {"REWARD_SERVICE_MAX_PENDING_ITEMS": "2", "REWARD_SERVICE_MAX_BATCH_ITEMS": "2",
           "REWARD_SERVICE_WORKERS": "1", "REWARD_SERVICE_RETRY_AFTER_S": "3"}
    with run_server(tmp_path, env) as live:
        slow = [{"verifier": "test_sleep", "response": "x", "options": {"seconds": 1.0}}] * 2
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            first = ex.submit(verify, live, slow)
            time.sleep(0.4)  # admitted and running: the queue is full
            r = verify(live, [{"verifier": "exact_match", "response": "a", "reference": "a"}])
            assert first.result().status_code == 200
        assert r.status_code == 429
        assert r.headers["retry-after"] == "3"
        assert "saturated" in r.json()["detail"]


def test_a_batch_larger_than_the_queue_is_413_not_429(tmp_path: Path) -> None:
    """Retrying cannot help a batch the admission queue can never hold: it is too large, not early."""
    item = {"verifier": "exact_match", "response": "a", "reference": "a"}
    env = {"REWARD_SERVICE_MAX_PENDING_ITEMS": "3", "REWARD_SERVICE_MAX_BATCH_ITEMS": "3",
           "REWARD_SERVICE_WORKERS": "1"}
    with run_server(tmp_path, env) as live:
        r = verify(live, [item] * 4)
        assert r.status_code == 413 and "limit of 3" in r.json()["detail"]
        assert verify(live, [item] * 3).status_code == 200


def test_settings_refuse_a_batch_limit_above_the_queue() -> None:
    from pydantic import ValidationError

    from reward_service.settings import load_settings

    with pytest.raises(ValidationError, match="max_batch_items .* must not exceed max_pending_items"):
        load_settings(max_pending_items=10, max_batch_items=20)


def test_admission_refuses_more_than_its_capacity_as_413() -> None:
    from reward_service.admission import Admission
    from reward_service.errors import ApiError

    admission = Admission(5)
    with pytest.raises(ApiError) as err:
        with admission.admit(6):
            pass
    assert err.value.status_code == 413 and "max_pending_items" in err.value.message
    with admission.admit(5):
        assert admission.pending == 5
    assert admission.pending == 0


@pytest.mark.parametrize("field", ["response", "reference", "id", "group"])
def test_lone_surrogates_are_a_422_naming_the_item(server: LiveServer, field: str) -> None:
    """"\ud800" is valid JSON but not valid Unicode text: refused with the item and field named, never a 500."""
    items = [{"verifier": "exact_match", "response": "a", "reference": "a"} for _ in range(3)]
    items[1][field] = "bad \ud800 text"
    body = json.dumps({"items": items})  # ensure_ascii keeps the escape, as a careless client sends it
    with server.client() as c:
        r = c.post("/v1/verify", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert f"items[1].{field}" in r.json()["detail"] and r.json()["loc"][:3] == ["items", 1, field]
        nested = json.dumps({"items": [{"verifier": "exact_match", "response": "a",
                                        "reference": ["ok", {"x": "\udfff"}]}]})
        r = c.post("/v1/verify", content=nested, headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["loc"] == ["items", 0, "reference", 1, "x"]
        r = c.post("/v1/verify", json={"items": [{"verifier": "exact_match", "response": "ok", "reference": "ok"}]})
        assert r.status_code == 200 and r.json()["results"][0]["score"] == 1.0


def test_concurrent_clients_each_get_their_own_answers(server: LiveServer) -> None:
    def call(k: int) -> list[float | None]:
        items = [{"id": f"{k}-{j}", "verifier": "exact_match", "response": str(j % 3), "reference": str(k % 3)}
                 for j in range(20)]
        r = verify(server, items)
        assert r.status_code == 200
        res = r.json()["results"]
        assert [x["id"] for x in res] == [i["id"] for i in items]
        return [x["score"] for x in res]

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        outcomes = list(ex.map(call, range(16)))
    for k, scores in enumerate(outcomes):
        assert scores == [1.0 if j % 3 == k % 3 else 0.0 for j in range(20)]


def test_verifier_catalogue_lists_schemas(server: LiveServer) -> None:
    with server.client() as c:
        data = c.get("/v1/verifiers").json()["verifiers"]
    names = {v["name"]: v for v in data}
    for name in ("exact_match", "regex", "multiple_choice"):
        assert name in names
        assert names[name]["version"]
        assert names[name]["options_schema"]["type"] == "object"
    assert "ignore_case" in names["exact_match"]["options_schema"]["properties"]


def test_health_ready_metrics(server: LiveServer) -> None:
    with server.client() as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json()["ready"] is True
        c.post("/v1/verify", json={"items": [{"verifier": "exact_match", "response": "a", "reference": "a"}]})
        text = c.get("/metrics").text
    for name in ("reward_requests_total", "reward_items_total", "reward_item_latency_seconds_bucket",
                 "reward_request_latency_seconds_bucket", "reward_queue_depth", "reward_workers_busy"):
        assert name in text
    assert 'reward_items_total{status="ok",verifier="exact_match"}' in text


def test_request_id_is_echoed(server: LiveServer) -> None:
    with server.client() as c:
        r = c.get("/healthz", headers={"X-Request-ID": "abc123"})
    assert r.headers["x-request-id"] == "abc123"


def test_docs_render_offline(server: LiveServer) -> None:
    with server.client() as c:
        html = c.get("/docs").text
        assert "cdn.jsdelivr" not in html and "unpkg" not in html
        assert "/static/docs/swagger-ui-bundle.js" in html
        assert c.get("/static/docs/swagger-ui-bundle.js").status_code == 200
        spec = c.get("/openapi.json").json()
    assert "/v1/verify" in spec["paths"]
