"""Jobs (/v1/jobs) and streamed /v1/verify against a real server: early verdicts stream before late ones, a cancel by
tag or by id kills the job's sandbox programs and frees their slots, a high-priority job overtakes 10,000 queued
low-priority items, a job survives SIGKILL and restart with the store on (each item answered once), a restarted
server without a store answers a known id ``lost``, and each limit is refused with its 429/413."""
from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live_restart import Restarter
from tests.support.processes import wait_until, with_marker
from tests.support.server import LiveServer, run_server

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def quick(i: int) -> dict[str, Any]:
    return {"id": f"q{i}", "verifier": "exact_match", "response": "a", "reference": "a"}


def slow(i: int, seconds: float) -> dict[str, Any]:
    return {"id": f"s{i}", "verifier": "test_sleep", "response": "x", "options": {"seconds": seconds}}


def submit(c: httpx.Client, items: list[dict[str, Any]], **extra: Any) -> str:
    r = c.post("/v1/jobs", json={"items": items, **extra})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["state"] in ("queued", "running", "done") and body["counts"]["total"] == len(items)
    return str(body["id"])


def finished(c: httpx.Client, job: str, within_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while True:
        r = c.get(f"/v1/jobs/{job}", params={"wait": 5})
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        if body["state"] in ("done", "cancelled"):
            return body
        assert time.monotonic() < deadline, body["counts"]


def sleeper_program(marker: str) -> dict[str, Any]:
    code = ("import os, sys\n"
            f"os.execv(sys.executable, [sys.executable, '-c', 'import time\\ntime.sleep(600)', {marker!r}])\n")
    return {"verifier": "code", "response": code, "reference": {"cases": [{"input": "", "output": "x"}]},
            "options": {"test_timeout_s": 120, "timeout_s": 200}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with run_server(tmp_path_factory.mktemp("jobs"), {"REWARD_SERVICE_SANDBOX_MAX_CONCURRENT": "2",
                                                       "REWARD_SERVICE_SANDBOX_WARM_POOL": "2"}) as srv:
        yield srv


def test_a_job_streams_early_verdicts_before_late_ones(server: LiveServer) -> None:
    items = [slow(0, 3.0), *(quick(i) for i in range(5))]
    with server.client() as c:
        job = submit(c, items, tags=["step:1"])
        with c.stream("GET", f"/v1/jobs/{job}/results") as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
            lines = [json.loads(line) for line in r.iter_lines() if line]
        assert [x["id"] for x in lines][-1] == "s0", lines  # the slow item, decided last, arrives last
        assert sorted(x["index"] for x in lines) == list(range(6))  # each item once
        assert all(x["status"] == "ok" for x in lines)
        body = c.get(f"/v1/jobs/{job}").json()
        assert body["state"] == "done" and body["counts"]["done"] == 6
        assert [r["id"] for r in body["results"]] == ["s0", "q0", "q1", "q2", "q3", "q4"]  # request order
        # a reader that lost its connection resumes after the lines it has
        with c.stream("GET", f"/v1/jobs/{job}/results", params={"after": 4}) as r:
            rest = [json.loads(line) for line in r.iter_lines() if line]
        assert rest == lines[4:]


def test_verify_streams_verdicts_as_they_are_decided(server: LiveServer) -> None:
    items = [slow(0, 3.0), *(quick(i) for i in range(3))]
    with server.client() as c, c.stream("POST", "/v1/verify", json={"items": items},
                                        headers={"Accept": "application/x-ndjson"}) as r:
        assert r.status_code == 200
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert lines[-1] == {"done": True, "groups": None}
    verdicts = lines[:-1]
    assert verdicts[-1]["id"] == "s0" and {v["index"] for v in verdicts} == {0, 1, 2, 3}


@needs_bwrap
@pytest.mark.parametrize("how", ["tag", "id"])
def test_a_cancelled_job_has_its_sandbox_programs_killed_and_slots_freed(server: LiveServer, how: str) -> None:
    marker = f"job-{uuid.uuid4().hex}"
    tag = f"step:{uuid.uuid4().hex[:8]}"
    with server.client() as c:
        job = submit(c, [sleeper_program(marker) for _ in range(2)] + [quick(0)], tags=[tag, "run:test"])
        wait_until(lambda: len(with_marker(marker)) == 2, 60, "both programs run, holding both sandbox slots")
        running = with_marker(marker)
        r = c.delete("/v1/jobs", params={"tag": tag}) if how == "tag" else c.delete(f"/v1/jobs/{job}")
        assert r.status_code == 200 and r.json()["cancelled"] == [job], r.text
        wait_until(lambda: not with_marker(marker), 1.0 if how == "id" else 5.0,
                   f"the cancelled job's programs {running} are gone")
        body = finished(c, job, 30)
        assert body["state"] == "cancelled"
        statuses = [r["status"] for r in body["results"]]
        assert statuses[:2] == ["cancelled", "cancelled"] and statuses[2] == "ok", body["results"]
        assert all(r["score"] is None for r in body["results"][:2])
        # both slots are free: a program runs at once (the killed ones had 600 s to go)
        ran = c.post("/v1/sandbox/run", json={"code": "print(6 * 7)"}, timeout=30)
        assert ran.status_code == 200 and ran.json()["stdout"] == "42\n"
        assert c.delete(f"/v1/jobs/{job}").json()["cancelled"] == []  # a second delete cancels nothing


def test_a_high_priority_job_overtakes_ten_thousand_queued_low_ones(server: LiveServer) -> None:
    def items(prefix: str, n: int) -> list[dict[str, Any]]:
        return [{"id": f"{prefix}{i}", "verifier": "test_sleep", "response": "x", "options": {"seconds": 0.001}}
                for i in range(n)]

    with server.client() as c:
        def low_done() -> int:
            return sum(c.get(f"/v1/jobs/{j}", params={"results": False}).json()["counts"]["done"] for j in low)

        # 10,000 low items, in jobs of at most max_batch_items
        low = [submit(c, items(f"l{k}-", n), priority="low") for k, n in enumerate((4000, 4000, 2000))]
        wait_until(lambda: low_done() > 0, 60, "the low-priority jobs are being served")
        low_before = low_done()
        high_job = submit(c, items("h", 1000), priority="high")
        body = finished(c, high_job)
        low_after = low_done()
        for j in low:
            c.delete(f"/v1/jobs/{j}")
    assert body["state"] == "done" and body["counts"]["statuses"] == {"ok": 1000}
    assert low_after < 10_000, "the low-priority job ended first"
    # Taking turns would have served about as many low items as high ones meanwhile; the priority lets through only
    # the chunks already in the workers and those of the high job's first, unproven chunk (one item per chunk).
    assert low_after - low_before < 500, (low_before, low_after)


def test_a_job_survives_sigkill_and_restart_with_the_store_on(tmp_path: Path) -> None:
    store = tmp_path / "jobs.sqlite3"
    server = Restarter(tmp_path, {"REWARD_SERVICE_JOBS_STORE": str(store), "REWARD_SERVICE_SANDBOX_BACKEND": "none"})
    srv = server.start()
    try:
        items = [{**slow(i, 0.3), "id": f"i{i}"} for i in range(16)]
        with srv.client() as c:
            job = submit(c, items, tags=["run:restart"])
            wait_until(lambda: 2 <= c.get(f"/v1/jobs/{job}").json()["counts"]["done"] < 16, 60,
                       "some items are done, not all")
            before = c.get(f"/v1/jobs/{job}").json()
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(timeout=10)
        server.stop()
        srv = server.start()
        with srv.client() as c:
            body = finished(c, job)
            with c.stream("GET", f"/v1/jobs/{job}/results") as r:
                lines = [json.loads(line) for line in r.iter_lines() if line]
        assert body["state"] == "done" and body["counts"] == {"total": 16, "done": 16, "statuses": {"ok": 16}}
        assert [r["id"] for r in body["results"]] == [f"i{i}" for i in range(16)]
        assert sorted(x["index"] for x in lines) == list(range(16)), "an item answered twice or never"
        for i, result in enumerate(before["results"]):  # what was decided before the kill is served as it was
            if result is not None:
                assert body["results"][i] == result
    finally:
        server.stop()


def test_without_a_store_a_restarted_server_answers_a_known_job_lost(tmp_path: Path) -> None:
    server = Restarter(tmp_path, {"REWARD_SERVICE_JOBS_STORE": "off", "REWARD_SERVICE_SANDBOX_BACKEND": "none"})
    srv = server.start()
    try:
        with srv.client() as c:
            job = submit(c, [slow(0, 30)])
        server.stop()
        srv = server.start()
        with srv.client() as c:
            r = c.get(f"/v1/jobs/{job}")
            assert r.status_code == 410 and "lost" in r.json()["detail"], r.text
            assert c.get("/v1/jobs/job-00000000-" + "0" * 24).status_code == 410  # the id names an earlier run
            assert c.get("/v1/jobs/not-a-job").status_code == 404
    finally:
        server.stop()


def test_each_jobs_limit_refuses_a_client_that_tries_to_exceed_it(tmp_path: Path) -> None:
    env = {"REWARD_SERVICE_JOBS_MAX_JOBS_PER_CLIENT": "2", "REWARD_SERVICE_JOBS_MAX_QUEUED_ITEMS": "6",
           "REWARD_SERVICE_JOBS_MAX_STORED_RESULTS": "8", "REWARD_SERVICE_SANDBOX_BACKEND": "none"}
    with run_server(tmp_path, env) as srv, srv.client() as c:
        too_big = c.post("/v1/jobs", json={"items": [slow(i, 0) for i in range(7)]})
        assert too_big.status_code == 413 and "jobs_max_queued_items" in too_big.text
        first = submit(c, [slow(i, 30) for i in range(3)])
        second = submit(c, [slow(i, 30) for i in range(2)])
        third = c.post("/v1/jobs", json={"items": [quick(0)]})
        assert third.status_code == 429 and "jobs_max_jobs_per_client" in third.text
        assert third.headers["retry-after"]
        c.delete(f"/v1/jobs/{second}")
        finished(c, second, 30)
        over_queue = c.post("/v1/jobs", json={"items": [slow(i, 30) for i in range(4)]})  # 3 queued + 4 > 6
        assert over_queue.status_code == 429 and "jobs_max_queued_items" in over_queue.text
        c.delete(f"/v1/jobs/{first}")
        finished(c, first, 30)
        # 5 results held until the TTL; 4 more would pass the 8 kept
        over_store = c.post("/v1/jobs", json={"items": [quick(i) for i in range(4)]})
        assert over_store.status_code == 429 and "jobs_max_stored_results" in over_store.text
        assert submit(c, [quick(i) for i in range(3)])  # what fits is still accepted
        bad_tag = c.post("/v1/jobs", json={"items": [quick(0)], "tags": [""]})
        assert bad_tag.status_code == 422
        bad_priority = c.post("/v1/jobs", json={"items": [quick(0)], "priority": "urgent"})
        assert bad_priority.status_code == 422


def test_results_are_kept_for_the_ttl_then_dropped_from_memory_and_store(tmp_path: Path) -> None:
    store = tmp_path / "ttl.sqlite3"
    env = {"REWARD_SERVICE_JOBS_TTL_S": "2", "REWARD_SERVICE_JOBS_STORE": str(store),
           "REWARD_SERVICE_SANDBOX_BACKEND": "none"}
    with run_server(tmp_path, env) as srv, srv.client() as c:
        job = submit(c, [quick(0)])
        body = finished(c, job)
        assert body["expires"] == pytest.approx(body["ended"] + 2)
        assert c.get(f"/v1/jobs/{job}").status_code == 200  # kept while the TTL runs
        wait_until(lambda: c.get(f"/v1/jobs/{job}").status_code == 404, 30, "the results expired")
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM verdicts").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM jobs").fetchone() == (0,)


def test_sigterm_lets_result_streams_go_and_the_job_goes_on_after_the_restart(tmp_path: Path) -> None:
    env = {"REWARD_SERVICE_JOBS_STORE": str(tmp_path / "jobs.sqlite3"), "REWARD_SERVICE_SHUTDOWN_GRACE_S": "1",
           "REWARD_SERVICE_SANDBOX_BACKEND": "none"}
    server = Restarter(tmp_path, env)
    srv = server.start()
    try:
        with srv.client() as c:
            job = submit(c, [quick(0), slow(1, 4)])
            with c.stream("GET", f"/v1/jobs/{job}/results") as r:
                lines = r.iter_lines()
                assert json.loads(next(lines))["id"] == "q0"
                srv.proc.send_signal(signal.SIGTERM)
                rest = list(lines)  # the stream ends with the shutdown, not with the job
            assert not [line for line in rest if line]
        # the server did not wait out its backstop (shutdown_grace_s + 15 s) for the open stream
        assert srv.proc.wait(timeout=12) is not None
        server.stop()
        srv = server.start()
        with srv.client() as c:
            body = finished(c, job)
        assert body["state"] == "done" and [r["status"] for r in body["results"]] == ["ok", "ok"]
    finally:
        server.stop()


def scrape(c: httpx.Client) -> dict[str, float]:
    """The jobs' samples of /metrics, by name and labels as exposed."""
    text = c.get("/metrics").text
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("reward_jobs")}


def test_metrics_report_jobs_by_state_queued_items_by_priority_and_the_stores_writes(tmp_path: Path) -> None:
    env = {"REWARD_SERVICE_SANDBOX_BACKEND": "none", "REWARD_SERVICE_WORKERS": "1"}
    with run_server(tmp_path, env) as srv, srv.client() as c:
        empty = scrape(c)
        assert empty['reward_jobs{state="running"}'] == 0 and empty['reward_jobs_queued_items{priority="high"}'] == 0
        writes = empty["reward_jobs_store_writes_total"]
        low = submit(c, [slow(i, 60) for i in range(3)], priority="low")
        high = submit(c, [slow(10 + i, 60) for i in range(2)], priority="high")
        seen = scrape(c)
        assert seen['reward_jobs_queued_items{priority="low"}'] == 3
        assert seen['reward_jobs_queued_items{priority="high"}'] == 2
        assert seen['reward_jobs_queued_items{priority="normal"}'] == 0
        assert seen['reward_jobs{state="queued"}'] + seen['reward_jobs{state="running"}'] == 2
        assert seen["reward_jobs_held_items"] == 5
        assert seen['reward_jobs_submitted_total{priority="low"}'] == 1
        assert seen["reward_jobs_store_writes_total"] >= writes + 2  # each job written before its 202
        assert seen["reward_jobs_store_bytes"] > 0
        c.delete(f"/v1/jobs/{low}")
        c.delete(f"/v1/jobs/{high}")
        finished(c, low, 60)
        finished(c, high, 60)
        done = submit(c, [quick(i) for i in range(4)])
        finished(c, done, 60)
        after = scrape(c)
        assert after['reward_jobs{state="cancelled"}'] == 2 and after['reward_jobs{state="done"}'] == 1
        assert sum(v for k, v in after.items() if k.startswith("reward_jobs_queued_items")) == 0
        assert after["reward_jobs_store_verdicts_total"] == 9  # every verdict written once, the cancelled ones too
        assert after["reward_jobs_held_items"] == 9


def test_a_jobs_results_and_group_statistics_are_the_verify_answers(server: LiveServer) -> None:
    """GET /v1/jobs/{id} writes its results from the verdicts as held: the same results and group statistics as
    /v1/verify gives for the same items, nulls where undecided, valid JSON whatever a verdict's text holds."""
    items = [{"id": f"g{i}", "verifier": "exact_match", "response": ["a", "b", 'say "a"\n\tok'][i % 3],
              "reference": "a", "group": f"p{i % 2}"} for i in range(6)]
    with server.client() as c:
        verified = c.post("/v1/verify", json={"items": items}).json()
        body = finished(c, submit(c, items))
        assert body["groups"] == verified["groups"] and set(body["groups"]) == {"p0", "p1"}
        strip = [{k: v for k, v in r.items() if k != "elapsed_ms"} for r in verified["results"]]
        assert [{k: v for k, v in r.items() if k != "elapsed_ms"} for r in body["results"]] == strip
        running = submit(c, [slow(0, 30), quick(1)])
        wait_until(lambda: c.get(f"/v1/jobs/{running}").json()["counts"]["done"] == 1, 30, "the quick item")
        partial = c.get(f"/v1/jobs/{running}").json()
        assert partial["results"][0] is None and partial["results"][1]["id"] == "q1"
        assert c.get(f"/v1/jobs/{running}", params={"results": False}).json()["results"] is None
        c.delete(f"/v1/jobs/{running}")


def test_verdict_texts_read_back_as_the_json_module_would_write_them() -> None:
    """The one-verdict-at-a-time answers (job results, the NDJSON stream) are written by orjson: what they hold must
    read back as the verdict itself, keys that are not strings and values orjson refuses included."""
    import json

    from reward_service.schemas.verify import json_text

    verdicts = [
        {"id": "é-1", "score": 0.5, "status": "ok", "reason": "ünïcode ✓ \U0001F600", "details": {"n": 10 ** 18},
         "elapsed_ms": 1e-05, "turn_scores": None},
        {"id": None, "score": None, "status": "error", "reason": "", "details": {1: "int key", "t": (1, 2)},
         "elapsed_ms": 0.0, "turn_scores": [1.0, 0.0]},
        {"id": "x", "score": 1.0, "status": "ok", "reason": "", "details": {"big": 2 ** 70},
         "elapsed_ms": 2.5, "turn_scores": None},
        {"id": "y", "score": 1.0, "status": "ok", "reason": "", "details": {"set": {1}}, "elapsed_ms": 2.5,
         "turn_scores": None},
    ]
    for v in verdicts:
        try:
            expected = json.loads(json.dumps(v))
        except TypeError:  # a set: neither module writes it without help; the json module's error stands
            with pytest.raises(TypeError):
                json_text(v)
            continue
        assert json.loads(json_text(v)) == expected
