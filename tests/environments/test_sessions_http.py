"""Sessions over plain HTTP on a real server: a python and a sql episode with their rewards, the typed errors, and
what one session can never see of another."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.environments.conftest import PER_CLIENT
from tests.support.server import LiveServer


def reset(c: httpx.Client, env: str, **body: Any) -> str:
    r = c.post(f"/envs/{env}/reset", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["done"] is False and r.json()["reward"] is None
    sid: str = r.json()["observation"]["session_id"]
    return sid


def step(c: httpx.Client, env: str, sid: str, action: dict[str, Any], **extra: Any) -> dict[str, Any]:
    r = c.post(f"/envs/{env}/step", json={"session_id": sid, "action": action, **extra})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_a_python_episode_keeps_its_state_and_ends_with_its_reward(env_server: LiveServer) -> None:
    with env_server.client() as c:
        sid = reset(c, "python", prompt="What is 6 times 7?", reward={"verifier": "math", "reference": "42"})
        first = step(c, "python", sid, {"code": "import math\nx = 6 * 7\nprint('set')"})
        assert first["observation"]["stdout"] == "set\n"
        out = step(c, "python", sid, {"code": "open('notes.txt', 'w').write(str(x))\nmath.sqrt(x * x)"})
        assert out["observation"]["value"] == "42.0" and out["reward"] is None and out["done"] is False
        assert step(c, "python", sid, {"code": "open('notes.txt').read()"})["observation"]["value"] == "'42'"
        failed = step(c, "python", sid, {"code": "1 / 0"})["observation"]
        assert failed["status"] == "error" and failed["exception"]["type"] == "ZeroDivisionError"
        state = c.get("/envs/python/state", params={"session_id": sid}).json()
        assert state["step_count"] == 4 and state["interpreter"] == "alive"
        end = step(c, "python", sid, {"final_answer": "The answer is \\boxed{42}"})
        assert end["done"] is True and end["reward"] == 1.0
        assert end["observation"]["verdict"]["status"] == "ok"
        closed = c.post("/envs/python/close", json={"session_id": sid}).json()
        assert closed["closed"] is True and closed["reward"] == 1.0
        gone = c.post("/envs/python/step", json={"session_id": sid, "action": {"code": "x"}})
        assert gone.status_code == 410 and gone.json()["code"] == "session_lost"


def test_a_wrong_answer_scores_zero_and_close_with_score_scores_the_transcript(env_server: LiveServer) -> None:
    with env_server.client() as c:
        sid = reset(c, "python", reward={"verifier": "math", "reference": "42"})
        assert step(c, "python", sid, {"final_answer": "41"})["reward"] == 0.0
        sid = reset(c, "python", reward={"verifier": "math", "reference": "42"})
        step(c, "python", sid, {"code": "print(42)"})
        closed = c.post("/envs/python/close", json={"session_id": sid, "score": True}).json()
        # no final answer: the transcript has no last assistant turn to read, and the verdict says so
        assert closed["verdict"]["status"] == "no_answer" and closed["reward"] == closed["verdict"]["score"]


def test_a_sql_episode_runs_guarded_queries_and_is_scored_by_the_sql_verifier(env_server: LiveServer) -> None:
    gold = "SELECT count(*) FROM singer"
    with env_server.client() as c:
        r = c.post("/envs/sql/reset", json={"database": "concert_singer",
                                            "reward": {"verifier": "sql",
                                                       "reference": {"sql": gold, "database": "concert_singer"}}})
        assert r.status_code == 200, r.text
        first = r.json()["observation"]
        assert "singer" in [row[0] for row in first["rows"]]
        sid = first["session_id"]
        rows = step(c, "sql", sid, {"query": "SELECT name FROM singer ORDER BY name"})["observation"]
        assert rows["status"] == "ok" and rows["columns"] == ["name"] and rows["rows"]
        for hostile in ("DROP TABLE singer", "SELECT 1; SELECT 2", "ATTACH DATABASE '/tmp/x' AS x",
                        "SELECT load_extension('/tmp/x')"):
            refused = step(c, "sql", sid, {"query": hostile})["observation"]
            assert refused["status"] != "ok", hostile
        still = step(c, "sql", sid, {"query": gold})["observation"]
        assert still["status"] == "ok" and still["rows"][0][0] > 0
        end = step(c, "sql", sid, {"final_answer": gold})
        assert end["done"] is True and end["reward"] == 1.0, end


def test_errors_are_typed_and_name_the_field(env_server: LiveServer) -> None:
    with env_server.client() as c:
        assert c.post("/envs/nope/reset", json={}).status_code == 404
        r = c.post("/envs/python/reset", json={"reward": {"verifier": "no_such_verifier"}})
        assert r.status_code == 422 and r.json()["error"]["field"] == "reward.verifier"
        r = c.post("/envs/python/reset", json={"colour": "blue"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "colour"
        r = c.post("/envs/sql/reset", json={"database": "../etc/passwd"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "database"
        sid = reset(c, "python")
        r = c.post("/envs/python/step", json={"session_id": sid, "action": {"cod": "1"}})
        assert r.status_code == 422 and r.json()["error"]["field"].startswith("action")
        r = c.post("/envs/python/step", json={"session_id": sid, "action": {"code": "1"}, "timeout_s": -1})
        assert r.status_code == 422 and r.json()["error"]["field"] == "timeout_s"
        r = c.post("/envs/python/step", json={"session_id": "otherinstance-0123", "action": {"code": "1"}})
        assert r.status_code == 410 and "otherinstance" in r.json()["detail"]
        r = c.post("/envs/sql/step", json={"session_id": sid, "action": {"query": "SELECT 1"}})
        assert r.status_code == 422 and r.json()["error"]["field"] == "session_id"
        c.post("/envs/python/close", json={"session_id": sid})


def test_a_step_without_a_session_behaves_as_upstream(env_server: LiveServer) -> None:
    with env_server.client() as c:
        out = c.post("/envs/python/step", json={"action": {"code": "y = 5\ny"}}).json()
        assert out["observation"]["value"] == "5" and "session_id" not in out["observation"]
        again = c.post("/envs/python/step", json={"action": {"code": "y"}}).json()
        assert again["observation"]["exception"]["type"] == "NameError"


def test_the_per_client_maximum_is_a_capacity_error_with_retry_after(env_server: LiveServer) -> None:
    with env_server.client() as c:
        before = c.get("/envs").json()["sessions"]["live"]  # done episodes hold no slot
        opened = [reset(c, "sql", database="flat_db") for _ in range(PER_CLIENT - before)]
        r = c.post("/envs/sql/reset", json={"database": "flat_db"})
        assert r.status_code == 429 and r.json()["code"] == "capacity" and int(r.headers["retry-after"]) >= 1
        for sid in opened:
            assert c.post("/envs/sql/close", json={"session_id": sid}).status_code == 200
        sid = reset(c, "sql", database="flat_db")
        c.post("/envs/sql/close", json={"session_id": sid})


def test_a_session_sees_nothing_of_another(env_server: LiveServer) -> None:
    with env_server.client() as c:
        a, b = reset(c, "python"), reset(c, "python")
        step(c, "python", a, {"code": "secret = 'a-only'\nopen('secret.txt', 'w').write(secret)"})
        # a's step holds a process while b looks for it
        with ThreadPoolExecutor(1) as pool:
            busy = pool.submit(step, c, "python", a, {"code": "import subprocess, time\n"
                                                            "p = subprocess.Popen(['sleep', '300'])\ntime.sleep(3)"})
            time.sleep(1.0)
            seen = step(c, "python", b, {"code": "import os\n"
                                                 "procs = [open(f'/proc/{p}/cmdline').read() for p in "
                                                 "os.listdir('/proc') if p.isdigit()]\n"
                                                 "('secret' in globals(), os.listdir('.'), "
                                                 "any('sleep' in x for x in procs))"})
            assert busy.result()["observation"]["status"] == "ok"
        assert seen["observation"]["value"] == "(False, [], False)", seen
        probe = step(c, "python", b, {"code": "import glob\nglob.glob('/work/*') + glob.glob('/tmp/*')"})
        assert probe["observation"]["value"] == "[]"
        for sid in (a, b):
            c.post("/envs/python/close", json={"session_id": sid})


def test_reset_writes_the_tasks_files_and_seeds_the_interpreter(env_server: LiveServer) -> None:
    with env_server.client() as c:
        draws = []
        for _ in range(2):
            sid = reset(c, "python", seed=7, files={"data/input.csv": "a,b\n1,2\n"}, setup_code="import random")
            out = step(c, "python", sid, {"code": "open('data/input.csv').read(), random.random()"})["observation"]
            assert out["value"].startswith("('a,b\\n1,2\\n', ")
            draws.append(out["value"])
            c.post("/envs/python/close", json={"session_id": sid})
        assert draws[0] == draws[1]  # the same seed, the same draw
        r = c.post("/envs/python/reset", json={"files": {"../../etc/passwd": "x"}})
        assert r.status_code == 422 and r.json()["error"]["field"] == "files"
