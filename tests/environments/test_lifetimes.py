"""The server owns every lifetime: a client SIGKILLed mid-episode leaks nothing past the idle TTL (200 sessions, all
reaped within TTL + 5 s, their sandboxes gone); a hung step or a fork bomb ends with a named status and gives its
slot back."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import LiveServer, run_server

TTL_S = 30.0  # longer than a keep-alive round over 200 sessions on a loaded machine
SESSIONS = 200


@pytest.fixture(scope="module")
def short_ttl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with run_server(tmp_path_factory.mktemp("ttl"), env={
            "REWARD_SERVICE_ENV_IDLE_TTL_S": str(TTL_S), "REWARD_SERVICE_SANDBOX_WARM_POOL": "0",
            "REWARD_SERVICE_ENV_SESSION_WARM_POOL": "4"}) as server:
        yield server


def sandboxes_of(pid: int) -> int:
    """bwrap processes among the server's children (each sandbox is one)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0
    count = 0
    for child in children:
        try:
            count += Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0].endswith(b"bwrap")
        except OSError:
            pass
        try:  # bwrap may sit behind the /bin/sh that puts it in its memory cgroup: one level down too
            for grandchild in Path(f"/proc/{child}/task/{child}/children").read_text().split():
                count += Path(f"/proc/{grandchild}/cmdline").read_bytes().split(b"\0")[0].endswith(b"bwrap")
        except OSError:
            pass
    return count


def test_a_sigkilled_clients_sessions_are_all_reaped_within_the_ttl(short_ttl_server: LiveServer,
                                                                      tmp_path: Path) -> None:
    url = short_ttl_server.url
    client = textwrap.dedent(f"""
        import httpx, sys, threading, time
        from concurrent.futures import ThreadPoolExecutor
        opened = []
        def one(i):
            with httpx.Client(timeout=120) as c:
                sid = c.post("{url}/envs/python/reset", json={{}}).json()["observation"]["session_id"]
                opened.append(sid)
                c.post("{url}/envs/python/step", json={{"session_id": sid, "action": {{"code": f"x = {{i}}"}}}})
                return sid
        def keep_alive():  # opening 200 sessions on a loaded machine can take longer than the TTL
            with httpx.Client(timeout=60) as c:
                while True:
                    for sid in list(opened):
                        r = c.get("{url}/envs/python/state", params={{"session_id": sid}})
                        assert r.status_code == 200, r.text
                    time.sleep(0.5)
        threading.Thread(target=keep_alive, daemon=True).start()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range({SESSIONS})))
        time.sleep(2.0)  # a last round of keep-alives
        print("opened", flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", client], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "opened"
        summary = httpx.get(f"{url}/envs").json()["sessions"]
        assert summary["live"] == SESSIONS, summary
        assert sandboxes_of(short_ttl_server.proc.pid) >= SESSIONS
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = time.monotonic()
    while time.monotonic() - killed < TTL_S + 5:
        summary = httpx.get(f"{url}/envs").json()["sessions"]
        if summary["open"] == 0:
            break
        time.sleep(0.25)
    assert summary["open"] == 0 and summary["reaped"] >= SESSIONS, summary
    deadline = time.monotonic() + 10
    while sandboxes_of(short_ttl_server.proc.pid) > 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sandboxes_of(short_ttl_server.proc.pid) <= 4  # the session warm pool alone
    metrics = httpx.get(f"{url}/metrics").text
    assert f'reward_env_sessions_ended_total{{env="python",why="reaped"}} {float(SESSIONS)}' in metrics


def test_a_hung_step_and_a_fork_bomb_end_by_name_and_give_their_slot_back(short_ttl_server: LiveServer) -> None:
    with httpx.Client(base_url=short_ttl_server.url, timeout=60) as c:
        for code, statuses in (
            ("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass", {"step_hung"}),
            ("import os\nwhile True:\n    try:\n        os.fork()\n    except BaseException:\n        pass",
             {"step_hung", "timeout"}),
        ):
            sid = c.post("/envs/python/reset", json={"reward": {"verifier": "math", "reference": "1"}}).json()[
                "observation"]["session_id"]
            live = c.get("/envs").json()["sessions"]["live"]
            out = c.post("/envs/python/step", json={"session_id": sid, "action": {"code": code},
                                                    "timeout_s": 1.0}).json()
            assert out["observation"]["status"] in statuses, out
            if out["observation"]["status"] == "step_hung":
                assert out["done"] is True and out["observation"]["verdict"]["status"] == "no_answer"
                assert c.get("/envs").json()["sessions"]["live"] == live - 1
            c.post("/envs/python/close", json={"session_id": sid})
