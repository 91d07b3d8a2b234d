"""POST /run_code (SandboxFusion's API) through verl's own SandboxFusion client against the real server.

verl's ``verl.utils.reward_score.sandbox_fusion`` package needs only ``requests``, but importing it the usual way runs
``verl/__init__.py``, which imports torch, ray and transformers (~13 s here). The package is therefore loaded from the
files verl ships, unchanged, under another top-level name: the code under test is verl's, only its parent packages
are skipped.
"""
from __future__ import annotations

import base64
import importlib.util
import json
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.support.server import LiveServer, run_server

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# SandboxFusion's RunCodeResponse and CommandRunResult fields.
RESPONSE_FIELDS = {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
COMMAND_FIELDS = {"status", "execution_time", "return_code", "stdout", "stderr"}
CPP_DOUBLE = "#include <iostream>\nint main() { long x; std::cin >> x; std::cout << 2 * x << std::endl; }\n"


def _load_verl_sandbox_fusion() -> ModuleType:
    spec = importlib.util.find_spec("verl")  # finds the package without running verl/__init__.py
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("verl is not installed (pip install verl==0.9.1 --no-deps)")
    pytest.importorskip("requests")
    pkg_dir = Path(next(iter(spec.submodule_search_locations))) / "utils" / "reward_score" / "sandbox_fusion"
    name = "_verl_sandbox_fusion"
    if name in sys.modules:
        return sys.modules[name]
    pkg_spec = importlib.util.spec_from_file_location(name, pkg_dir / "__init__.py",
                                                      submodule_search_locations=[str(pkg_dir)])
    assert pkg_spec is not None and pkg_spec.loader is not None
    module = importlib.util.module_from_spec(pkg_spec)
    sys.modules[name] = module
    pkg_spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def verl_sf() -> ModuleType:
    return _load_verl_sandbox_fusion()


@pytest.fixture(scope="module")
def url(server: LiveServer) -> str:
    return f"{server.url}/run_code"


@pytest.fixture(scope="module")
def languages(server: LiveServer) -> dict[str, Any]:
    with server.client() as c:
        return c.get("/v1/sandbox/languages").json()


def _need(languages: dict[str, Any], ours: str) -> None:
    if not languages.get(ours, {}).get("available"):
        pytest.skip(f"{ours} is not available on this host")


def _call(verl_sf: ModuleType, url: str, code: str, language: str, stdin: str | None = None,
          timeout: int = 10, memory_mb: int = 1024, compile_timeout: int | None = None) -> dict[str, Any]:
    """verl's raw client call; any transport or HTTP error fails the test with verl's own message."""
    response, error = verl_sf.utils.call_sandbox_api(url, code, stdin, compile_timeout or timeout, timeout, memory_mb,
                                                     language)
    assert error is None, error
    assert set(response) == RESPONSE_FIELDS
    for step in ("compile_result", "run_result"):
        assert response[step] is None or set(response[step]) == COMMAND_FIELDS
    return response


# --- the wire shapes, language by language ----------------------------------------------------------------------


def test_python_stdin_success(verl_sf: ModuleType, url: str) -> None:
    r = _call(verl_sf, url, "import sys\nprint(sys.stdin.read()[::-1])", "python", stdin="abc")
    assert (r["status"], r["message"], r["compile_result"]) == ("Success", "", None)
    run = r["run_result"]
    assert (run["status"], run["return_code"], run["stdout"]) == ("Finished", 0, "cba\n")
    assert run["execution_time"] > 0


def test_cpp_compiles_then_runs(verl_sf: ModuleType, url: str, languages: dict[str, Any]) -> None:
    _need(languages, "cpp")
    r = _call(verl_sf, url, CPP_DOUBLE, "cpp", stdin="21")
    assert r["status"] == "Success"
    assert (r["compile_result"]["status"], r["compile_result"]["return_code"]) == ("Finished", 0)
    assert (r["run_result"]["status"], r["run_result"]["return_code"], r["run_result"]["stdout"]) == \
        ("Finished", 0, "42\n")


def test_cpp_compile_error_has_no_run_result(verl_sf: ModuleType, url: str, languages: dict[str, Any]) -> None:
    _need(languages, "cpp")
    r = _call(verl_sf, url, "int main() { return }", "cpp")
    assert (r["status"], r["run_result"]) == ("Failed", None)
    compiled = r["compile_result"]
    assert compiled["status"] == "Finished" and compiled["return_code"] != 0
    assert "error" in compiled["stderr"]


def test_cpp_compile_over_compile_timeout_is_a_compile_time_limit(verl_sf: ModuleType, url: str,
                                                                   languages: dict[str, Any]) -> None:
    """SandboxFusion's compile_timeout is enforced per request: a compile that needs several CPU seconds, sent with
    compile_timeout=1 to a server whose own compile budget is 60 s (the default), is stopped and answered as a
    compile TimeLimitExceeded with no run."""
    _need(languages, "cpp")
    from tests.support.sandbox import HEAVY_TEMPLATES
    r = _call(verl_sf, url, HEAVY_TEMPLATES, "cpp", compile_timeout=1)
    assert (r["status"], r["run_result"]) == ("Failed", None)
    assert r["compile_result"]["status"] == "TimeLimitExceeded" and r["compile_result"]["return_code"] is None


@pytest.mark.parametrize("language, ours, code, stdout", [
    ("nodejs", "javascript", "const fs = require('fs'); console.log(fs.readFileSync(0, 'utf8').trim() + '!')", "hi!\n"),
    ("bash", "bash", "read x; echo \"$x!\"", "hi!\n"),
    ("java", "java", "import java.util.Scanner;\npublic class Main { public static void main(String[] a) {\n"
                     "  System.out.println(new Scanner(System.in).next() + \"!\"); } }", "hi!\n"),
    ("rust", "rust", "use std::io::Read;\nfn main() { let mut s = String::new();\n"
                     "  std::io::stdin().read_to_string(&mut s).unwrap(); println!(\"{}!\", s.trim()); }", "hi!\n"),
])
def test_more_languages(verl_sf: ModuleType, url: str, languages: dict[str, Any], language: str, ours: str,
                        code: str, stdout: str) -> None:
    _need(languages, ours)
    r = _call(verl_sf, url, code, language, stdin="hi")
    assert r["status"] == "Success", r
    assert r["run_result"]["stdout"] == stdout
    assert (r["compile_result"] is not None) == languages[ours]["compiled"]


def test_runtime_error_is_failed_with_the_exit_code(verl_sf: ModuleType, url: str) -> None:
    r = _call(verl_sf, url, "import sys\nprint('partial')\nsys.exit(3)", "python")
    assert r["status"] == "Failed"
    assert (r["run_result"]["status"], r["run_result"]["return_code"], r["run_result"]["stdout"]) == \
        ("Finished", 3, "partial\n")
    r = _call(verl_sf, url, "import os\nos.kill(os.getpid(), 11)", "python")
    assert (r["status"], r["run_result"]["status"], r["run_result"]["return_code"]) == ("Failed", "Finished", -11)


def test_timeout_is_time_limit_exceeded(verl_sf: ModuleType, url: str) -> None:
    r = _call(verl_sf, url, "print('started', flush=True)\nwhile True:\n    pass", "python", timeout=1)
    assert r["status"] == "Failed"
    run = r["run_result"]
    assert (run["status"], run["return_code"], run["stdout"]) == ("TimeLimitExceeded", None, "started\n")


def test_memory_limit_is_a_failed_run(verl_sf: ModuleType, url: str) -> None:
    r = _call(verl_sf, url, "x = bytearray(1 << 30)", "python", memory_mb=128)
    assert r["status"] == "Failed" and "memory" in r["message"]
    assert r["run_result"]["status"] == "Finished" and r["run_result"]["return_code"] != 0


def test_output_over_the_cap_is_a_failed_run(verl_sf: ModuleType, url: str) -> None:
    r = _call(verl_sf, url, "import sys\nsys.stdout.write('x' * (64 << 20))", "python")
    assert r["status"] == "Failed" and "output" in r["message"]
    assert r["run_result"]["status"] == "Finished" and r["run_result"]["return_code"] != 0


def test_files_in_and_fetch_files_out(server: LiveServer) -> None:
    body = {"code": "import pathlib\nprint(open('data/in.txt').read().upper(), end='')\n"
                    "pathlib.Path('out.txt').write_text('written')",
            "language": "python", "files": {"data/in.txt": base64.b64encode(b"hello").decode(), "skipped": None},
            "fetch_files": ["out.txt", "missing.txt"]}
    with server.client() as c:
        r = c.post("/run_code", json=body).json()
    assert (r["status"], r["run_result"]["stdout"]) == ("Success", "HELLO")
    assert r["files"] == {"out.txt": base64.b64encode(b"written").decode()}


# --- what is not the program's fault ----------------------------------------------------------------------------


def test_language_sandboxfusion_knows_but_we_do_not_offer_is_sandbox_error(verl_sf: ModuleType, url: str) -> None:
    r = _call(verl_sf, url, "println(1)", "julia")
    assert r["status"] == "SandboxError" and "julia" in r["message"]
    assert r["run_result"]["status"] == "Error"
    results, meta = verl_sf.check_correctness(url, {"inputs": [""], "outputs": ["1"]}, "println(1)",
                                              language="julia")
    assert results == [-1] and meta[0]["status"] == "sandbox_error"  # verl's "not the program's fault"


def test_disabled_sandbox_is_sandbox_error_never_a_verdict(verl_sf: ModuleType, tmp_path: Path) -> None:
    with run_server(tmp_path, {"REWARD_SERVICE_SANDBOX_BACKEND": "none", "REWARD_SERVICE_WORKERS": "1"}) as live:
        r = _call(verl_sf, f"{live.url}/run_code", "print(1)", "python")
        results, meta = verl_sf.check_correctness(f"{live.url}/run_code", {"inputs": [""], "outputs": ["1"]},
                                                  "print(1)")
    assert r["status"] == "SandboxError" and "sandbox_backend=none" in r["message"]
    assert (r["compile_result"], r["run_result"]["status"]) == (None, "Error")
    assert results == [-1] and meta[0]["status"] == "sandbox_error"


@pytest.mark.parametrize("patch, field", [
    ({"language": "cobol"}, "language"),
    ({"run_timeout": -1}, "run_timeout"),
    ({"run_timeout": 0}, "run_timeout"),
    ({"memory_limit_MB": -5}, "memory_limit_MB"),
    ({"memory_limit_MB": 10**7}, "memory_limit_MB"),
    ({"files": {"../escape": "aGk="}}, "files"),
    ({"files": {"x": "not base64!"}}, "files"),
    ({"files": {"x": base64.b64encode(b"\xff\xfe").decode()}}, "files"),
    ({"fetch_files": ["/etc/passwd"]}, "fetch_files"),
    # client mistakes in file names, never a SandboxError (which verl reads as our fault)
    ({"files": {"a": "eA==", "a/b": "eQ=="}}, "files"),
    ({"files": {"main.py": "cHJpbnQoMik="}}, "files"),
    ({"files": {f"f{i}": "" for i in range(1001)}}, "files"),
    ({"files": {"a/": "eA=="}}, "files"),
])
def test_bad_values_are_422_naming_the_field(server: LiveServer, patch: dict[str, Any], field: str) -> None:
    with server.client() as c:
        r = c.post("/run_code", json={"code": "print(1)", "language": "python", **patch})
    assert r.status_code == 422, r.text
    body = r.json()
    locs = [e["loc"] for e in body.get("errors", [])] or [["body", *body["loc"]]]
    assert any(loc[1] == field for loc in locs), body


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_timeouts_are_refused(server: LiveServer, raw: str) -> None:
    for field in ("run_timeout", "compile_timeout"):
        content = '{"code": "print(1)", "language": "python", "' + field + '": ' + raw + "}"
        with server.client() as c:
            r = c.post("/run_code", content=content, headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", field], r.text


# --- verl's verdicts and scores from our answers ----------------------------------------------------------------

ECHO_PLUS_ONE = "x = int(input())\nif x == 3:\n    raise ValueError('three')\nif x == 4:\n    while True: pass\n" \
                "print(x + 1 if x != 2 else 0)\n"


def test_check_correctness_reads_each_outcome(verl_sf: ModuleType, url: str) -> None:
    cases = {"inputs": ["1", "2", "3", "4", "5"], "outputs": ["2", "3", "4", "5", "6"]}
    results, meta = verl_sf.check_correctness(url, cases, ECHO_PLUS_ONE, timeout=1)
    assert results == [True, False, -2, -3, True]  # pass, wrong answer, runtime error, timeout, pass
    assert [m["status"] for m in meta] == ["success", "wrong_answer", "runtime_error", "timeout", "success"]


def test_check_correctness_cpp_compile_error_and_pass(verl_sf: ModuleType, url: str,
                                                      languages: dict[str, Any]) -> None:
    _need(languages, "cpp")
    cases = {"inputs": ["1", "50"], "outputs": ["2", "100"]}
    assert verl_sf.check_correctness(url, cases, CPP_DOUBLE, language="cpp")[0] == [True, True]
    results, meta = verl_sf.check_correctness(url, cases, "int main( {", language="cpp")
    assert results == [-4, -4] and meta[0]["status"] == "compile_error"


def test_compute_score_is_the_pass_rate(verl_sf: ModuleType, url: str) -> None:
    completion = f"Here is my solution:\n```python\n{ECHO_PLUS_ONE}```"
    cases = json.dumps({"inputs": ["1", "2", "5", "7"], "outputs": ["2", "3", "6", "8"]})
    score, meta = verl_sf.compute_score(url, None, 1024, completion, cases, timeout=2)
    assert score == 0.75 and len(meta) == 4
    fn_cases = {"fn_name": "add", "inputs": ["1\n2", "3\n4"], "outputs": ["3", "8"]}
    score, _ = verl_sf.compute_score(url, None, 1024, "```python\ndef add(a, b):\n    return a + b\n```", fn_cases)
    assert score == 0.5


# --- token and admission control ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A token, one admission slot, and a 1 s compile budget (so requests here ask for compile_timeout=1)."""
    env = {"REWARD_SERVICE_AUTH_TOKEN": "sf-token", "REWARD_SERVICE_MAX_PENDING_ITEMS": "1",
           "REWARD_SERVICE_MAX_BATCH_ITEMS": "1", "REWARD_SERVICE_WORKERS": "1",
           "REWARD_SERVICE_SANDBOX_COMPILE_WALL_S": "1"}
    with run_server(tmp_path_factory.mktemp("guarded"), env) as live:
        yield live


def test_token_header_or_query(verl_sf: ModuleType, guarded: LiveServer) -> None:
    body = {"code": "print(1)", "language": "python", "compile_timeout": 1}
    with guarded.client() as c:
        assert c.post("/run_code", json=body).status_code == 401
        assert c.post("/run_code?token=wrong", json=body).status_code == 401
        ok = c.post("/run_code", json=body, headers={"Authorization": "Bearer sf-token"})
        assert ok.status_code == 200 and ok.json()["status"] == "Success"
    _, error = verl_sf.utils.call_sandbox_api(f"{guarded.url}/run_code", "print(1)", None, 1, 10, 256, "python")
    assert "401" in str(error)
    r = _call(verl_sf, f"{guarded.url}/run_code?token=sf-token", "print(1)", "python",  # verl sends no headers
              compile_timeout=1)
    assert r["status"] == "Success"


def test_saturated_server_answers_429_with_retry_after(guarded: LiveServer) -> None:
    slow = {"code": "import time\ntime.sleep(6)", "language": "python", "run_timeout": 10, "compile_timeout": 1}
    quick = {"code": "print(1)", "language": "python", "compile_timeout": 1}
    done = threading.Event()
    first: list[httpx.Response] = []

    def hold_the_only_slot() -> None:  # retried while a quick request holds the slot
        with guarded.client() as c:
            while not first or first[-1].status_code == 429:
                first.append(c.post("/run_code?token=sf-token", json=slow))
        done.set()

    thread = threading.Thread(target=hold_the_only_slot)
    thread.start()
    refused = None
    with guarded.client() as c:
        while refused is None and not done.is_set():
            r = c.post("/run_code?token=sf-token", json=quick)
            if r.status_code == 429:
                refused = r
    thread.join()
    assert refused is not None, "the slow run was never seen in flight"
    assert refused.headers["Retry-After"] == "1"
    assert first[-1].status_code == 200 and first[-1].json()["status"] == "Success"


# A compile of ~200k template instantiations (several CPU seconds), stopped at the guarded server's 1 s budget.
HEAVY_CPP = """template <int N, int M> struct A { static constexpr unsigned v = (A<N-1, M>::v + A<N, M-1>::v) % 1000; };
template <int M> struct A<0, M> { static constexpr unsigned v = 1; };
template <int N> struct A<N, 0> { static constexpr unsigned v = 1; };
int main() { return A<440, 440>::v & 1; }
"""


def test_compile_over_budget_is_compile_time_limit_exceeded(verl_sf: ModuleType, guarded: LiveServer,
                                                           languages: dict[str, Any]) -> None:
    _need(languages, "cpp")
    url = f"{guarded.url}/run_code?token=sf-token"
    r = _call(verl_sf, url, HEAVY_CPP, "cpp", compile_timeout=1)
    assert (r["status"], r["compile_result"]["status"], r["run_result"]) == ("Failed", "TimeLimitExceeded", None)
    results, meta = verl_sf.check_correctness(url, {"inputs": [""], "outputs": [""]}, HEAVY_CPP, timeout=1,
                                              language="cpp")
    assert results == [-4] and meta[0]["status"] == "compile_timeout"


def test_compile_timeout_becomes_the_runs_compile_budget() -> None:
    """/run_code maps compile_timeout onto Limits.compile_s, which the sandbox enforces per run
    (tests/sandbox/test_sandbox_backend.py: a heavy-template compile over a 1 s compile_s is a compile_error)."""
    from reward_service.routes.sandboxfusion import _limits
    from reward_service.schemas.sandboxfusion import RunCodeRequest
    from reward_service.settings import Settings

    body = RunCodeRequest(code="int main(){}", language="cpp", compile_timeout=0.5, run_timeout=3)
    limits = _limits(Settings(), body, [])
    assert (limits.compile_s, limits.wall_s, limits.cpu_s) == (0.5, 6, 3)


def test_run_timeout_is_cpu_time_with_a_wall_clock_backstop_of_twice_it() -> None:
    """docs/sandboxfusion.md: run_timeout is the run's CPU budget; the wall clock backs it up at 2 x, within the cap."""
    from reward_service.routes.sandboxfusion import _limits
    from reward_service.schemas.sandboxfusion import RunCodeRequest
    from reward_service.settings import Settings

    settings = Settings()
    limits = _limits(settings, RunCodeRequest(code="print(1)", language="python", run_timeout=3), [])
    assert (limits.cpu_s, limits.wall_s) == (3, 6)
    capped = _limits(settings, RunCodeRequest(code="print(1)", language="python", run_timeout=40), [])
    assert (capped.cpu_s, capped.wall_s) == (40, 60)
