"""The /v1/sandbox routes: result schema, validation against the caps, batches."""
from __future__ import annotations

import shutil

import pytest

from tests.support.server import LiveServer

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FIELDS = {"id", "status", "exit_code", "signal", "stdout", "stderr", "wall_ms", "cpu_ms", "max_rss_kb", "truncated",
          "compile_output", "files", "reason"}


def test_languages_lists_python_available(server: LiveServer) -> None:
    with server.client() as c:
        langs = c.get("/v1/sandbox/languages").json()
    assert langs["python"]["available"] is True
    assert {"c", "cpp", "javascript", "java", "go", "rust", "bash"} <= set(langs)


def test_run_returns_the_result_schema(server: LiveServer) -> None:
    with server.client() as c:
        r = c.post("/v1/sandbox/run", json={"id": "x1", "code": "import sys\nprint(sys.stdin.read()[::-1])",
                                            "stdin": "abc", "language": "py"}).json()
    assert set(r) == FIELDS
    assert (r["id"], r["status"], r["stdout"], r["exit_code"]) == ("x1", "ok", "cba\n", 0)


def test_a_run_may_do_without_a_network(server: LiveServer) -> None:
    code = ("import socket\ntry:\n    socket.socket()\n    print('inet')\nexcept OSError as e:\n    print(e.strerror)\n"
            "a, b = socket.socketpair()\nprint('unix')\n")
    with server.client() as c:
        offline = c.post("/v1/sandbox/run", json={"code": code, "network": "none"}).json()
        default = c.post("/v1/sandbox/run", json={"code": code}).json()
    assert offline["stdout"] == "Address family not supported by protocol\nunix\n", offline
    assert default["stdout"] == "inet\nunix\n", default


@pytest.mark.parametrize("body, status, needle", [
    ({"code": "1", "limits": {"wall_s": 10_000}}, 422, "exceeds the server cap"),
    ({"code": "1", "limits": {"memory_mb": -5}}, 422, "positive"),
    ({"code": "1", "language": "cobol"}, 422, "unknown language"),
    ({"code": "1", "files": {"../escape.txt": "x"}}, 422, "relative path"),
    ({"code": "1", "collect": ["/etc/passwd"]}, 422, "relative path"),
    ({"code": "1", "limits": {"bogus": 1}}, 422, "bogus"),
    ({"code": "1", "files": {"a/": "x"}}, 422, "names a directory"),
    ({"code": "1", "collect": ["out/"]}, 422, "names a directory"),
    ({"code": "1", "network": "host"}, 422, "'loopback' or 'none'"),
])
def test_bad_requests_are_clear_4xx(server: LiveServer, body: dict, status: int, needle: str) -> None:
    with server.client() as c:
        r = c.post("/v1/sandbox/run", json=body)
    assert r.status_code == status, r.text
    assert needle in r.text


@pytest.mark.parametrize("field", ["memory_mb", "processes", "open_files", "output_bytes", "disk_mb", "file_size_mb"])
def test_an_integer_limit_beyond_a_floats_range_is_a_422(server: LiveServer, field: str) -> None:
    """10**400 is a valid JSON integer; comparing it as a float overflowed into a 500."""
    content = '{"code": "print(1)", "limits": {"' + field + '": 1' + "0" * 400 + "}}"
    with server.client() as c:
        r = c.post("/v1/sandbox/run", content=content, headers={"content-type": "application/json"})
        assert r.status_code == 422 and field in r.text and "2**64" in r.text, r.text
        batch = '{"items": [{"code": "print(1)", "limits": {"' + field + '": 1' + "0" * 400 + "}}]}"
        r = c.post("/v1/sandbox/run_batch", content=batch, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text


def test_batch_keeps_order_ids_and_per_item_outcomes(server: LiveServer) -> None:
    items = [{"id": "ok", "code": "print('a')"}, {"id": "crash", "code": "raise SystemExit(4)"},
             {"id": "slow", "code": "import time\ntime.sleep(9)", "limits": {"wall_s": 0.5}},
             {"id": "c", "code": "int main(){ return }", "language": "c"}]
    with server.client() as c:
        if not c.get("/v1/sandbox/languages").json()["c"]["available"]:
            items[3]["language"], items[3]["code"] = "python", "def f(:"
        res = c.post("/v1/sandbox/run_batch", json={"items": items}).json()["results"]
    assert [r["id"] for r in res] == ["ok", "crash", "slow", "c"]
    assert [r["status"] for r in res][:3] == ["ok", "runtime_error", "timeout"]
    assert res[1]["exit_code"] == 4
    assert res[3]["status"] in ("compile_error", "runtime_error")  # a Python syntax error is a runtime error
    with server.client() as c:
        assert c.post("/v1/sandbox/run_batch", json={"items": []}).status_code == 422
        bad = c.post("/v1/sandbox/run_batch", json={"items": [{"code": "1"}, {"code": "1", "language": "x"}]})
    assert bad.status_code == 422 and bad.json()["loc"] == ["items", 1, "language"]


def test_a_run_without_wall_s_gets_the_backstop_of_its_cpu_budget() -> None:
    """The CPU budget decides: a wall_s the request leaves out is 3 x cpu_s + 2 s, within the server's default and
    cap; one it gives is kept."""
    from reward_service.routes.sandbox import to_request
    from reward_service.schemas.sandbox import RunIn
    from reward_service.settings import Settings
    from sandbox.bwrap import BwrapBackend, BwrapConfig

    settings = Settings().sandbox
    backend = BwrapBackend(BwrapConfig(warm_pool=0))

    def limits(given: dict) -> tuple[float, float]:
        got = to_request(settings, backend, RunIn(code="1", limits=given), loc=[]).limits
        return got.cpu_s, got.wall_s

    assert limits({"cpu_s": 5}) == (5, 17)
    assert limits({}) == (10, 32)  # the server's default 10 s of CPU
    assert limits({"cpu_s": 1}) == (1, 10)  # never below the server's default wall_s
    assert limits({"cpu_s": 30}) == (30, 60)  # never above its cap
    assert limits({"cpu_s": 5, "wall_s": 6}) == (5, 6)
