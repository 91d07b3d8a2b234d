"""Abandoned work stops: a client that disconnects has its queued items dropped and its running checks and
programs killed (``/v1/verify``, ``/v1/sandbox/run``, ``/v1/sandbox/run_batch``, ``/run_code``), and SIGTERM drains
for ``shutdown_grace_s`` and then answers what is left ``cancelled``. Real server, real workers, real sandboxes."""
from __future__ import annotations

import json
import shutil
import signal
import socket
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import all_gone, pids_in, wait_until, with_marker
from tests.support.server import LiveServer, run_server

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def sleepers(pid_dir: Path, n: int, seconds: float = 120.0) -> list[dict[str, Any]]:
    return [{"id": f"s{i}", "verifier": "test_pid_sleep", "response": "x",
             "options": {"pid_dir": str(pid_dir), "seconds": seconds, "timeout_s": 200}} for i in range(n)]


def post_then_disconnect(srv: LiveServer, path: str, body: dict[str, Any],
                         started: Callable[[], list[int]]) -> list[int]:
    """POST over a raw socket, wait until ``started()`` names processes (the work runs), then close the connection
    without reading an answer, as a client that gave up after its own deadline does. Returns those processes."""
    data = json.dumps(body).encode()
    host, port = srv.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        wait_until(lambda: bool(started()), 60, "the work started")
        running = started()
        sock.setblocking(False)
        try:
            assert not sock.recv(1), "the server answered before the client left: the test proves nothing"
        except BlockingIOError:
            pass
    return running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with run_server(tmp_path_factory.mktemp("cancel"), {"REWARD_SERVICE_WORKERS": "2",
                                                         "REWARD_SERVICE_SANDBOX_WARM_POOL": "2"}) as srv:
        yield srv


def test_a_disconnected_verify_request_has_its_running_checks_killed_and_its_queue_dropped(
        server: LiveServer, tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    body = {"items": sleepers(pid_dir, 6)}
    running = post_then_disconnect(server, "/v1/verify", body, lambda: pids_in(pid_dir))
    # a request not yet proven fast gets one check at a time (WorkerShares): one ran, five waited in the queue
    assert len(running) == 1, running
    wait_until(lambda: all_gone(running), 10, f"the workers running the abandoned checks {running} were killed")
    # the pool serves again (fresh workers), and the four queued items never start
    assert server.verify([{"verifier": "test_sleep", "response": "x", "options": {"seconds": 0.01}}] * 4)[0][
        "status"] == "ok"
    assert len(pids_in(pid_dir)) == 1, "an abandoned request's queued checks ran after its client left"


@needs_bwrap
@pytest.mark.parametrize("path", ["/v1/sandbox/run", "/v1/sandbox/run_batch", "/run_code"])
def test_a_disconnected_sandbox_request_has_its_programs_killed(server: LiveServer, path: str) -> None:
    marker = f"abandoned-{uuid.uuid4().hex}"
    code = ("import os, sys\n"
            f"os.execv(sys.executable, [sys.executable, '-c', 'import time\\ntime.sleep(600)', {marker!r}])\n")
    if path == "/v1/sandbox/run":
        body: dict[str, Any] = {"code": code, "limits": {"wall_s": 60, "cpu_s": 60}}
    elif path == "/v1/sandbox/run_batch":
        body = {"items": [{"code": code, "limits": {"wall_s": 60, "cpu_s": 60}} for _ in range(2)]}
    else:
        body = {"code": code, "language": "python", "run_timeout": 60}
    programs = 2 if path == "/v1/sandbox/run_batch" else 1
    running = post_then_disconnect(server, path, body,
                                   lambda: found if len(found := with_marker(marker)) == programs else [])
    wait_until(lambda: not with_marker(marker), 10, f"the abandoned programs {running} were killed")


def test_sigterm_drains_then_answers_what_is_left_cancelled(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    with run_server(tmp_path, {"REWARD_SERVICE_WORKERS": "2", "REWARD_SERVICE_SHUTDOWN_GRACE_S": "1",
                               "REWARD_SERVICE_SANDBOX_BACKEND": "none"}) as srv:
        answer: list[httpx.Response] = []
        items = [{"id": "quick", "verifier": "exact_match", "response": "a", "reference": "a"},
                 *sleepers(pid_dir, 3)]

        def call() -> None:
            with srv.client(timeout=120) as c:
                answer.append(c.post("/v1/verify", json={"items": items}))

        caller = threading.Thread(target=call)
        caller.start()
        wait_until(lambda: len(pids_in(pid_dir)) >= 1, 60, "the checks started")
        running = pids_in(pid_dir)
        srv.proc.send_signal(signal.SIGTERM)
        caller.join(60)
        assert answer, "no answer to the request in flight"
        assert answer[0].status_code == 200, answer[0].text
        results = {r["id"]: r for r in answer[0].json()["results"]}
        assert results["quick"]["status"] == "ok" and results["quick"]["score"] == 1.0
        for i in range(3):
            assert results[f"s{i}"]["status"] == "cancelled" and results[f"s{i}"]["score"] is None
            assert "shutting down" in results[f"s{i}"]["reason"]
        assert srv.proc.wait(timeout=30) is not None
        wait_until(lambda: all_gone(running), 10, "the workers were killed")
