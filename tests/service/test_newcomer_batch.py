"""``reward-service score`` where a newcomer trips: it ends in every case with its summary and an exit code that says
what happened, a field name no row has stops it before it starts, and a server that is not there is named at once
while one lost mid-run is waited for, saying so."""
from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.batch import cli_env, read_jsonl, score_cmd, with_group_killed, write_jsonl
from tests.support.live_restart import Restarter
from tests.support.server import ROOT, free_port

RUNS = 20  # the hang this guards against came in about 4 runs of 10


def score(inp: Path, out: Path, *args: str, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command in its own process group, killed with its workers if it overruns (a hang fails, never blocks)."""
    proc = subprocess.Popen(score_cmd(inp, out, *args), env={**cli_env(), **(env or {})}, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with_group_killed(proc)
        raise AssertionError(f"score did not end within {timeout} s: {score_cmd(inp, out, *args)}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def ended_with_summary(done: subprocess.CompletedProcess[str], code: int) -> None:
    assert done.returncode == code, (done.returncode, done.stderr[-3000:])
    assert "total" in done.stdout and "mean score" in done.stdout, done.stdout  # the summary table


# --- named fields -------------------------------------------------------------------------------------------------

def test_a_field_no_row_has_stops_the_run_naming_the_fields_there(tmp_path: Path) -> None:
    rows = [{"id": i, "completion": f"\\boxed{{{i}}}", "answer": str(i)} for i in range(6)]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    done = score(inp, out, "--verifier", "math", "--response-field", "completion", "--reference-field", "answr")
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert "--reference-field" in message and "'answr' is missing from all 6 rows" in message
    assert "'completion'" in message and "'answer'" in message and "--allow-missing-fields" in message
    assert not out.exists()

    done = score(inp, out, "--verifier", "math", "--reference-field", "answer")  # the default response field
    assert done.returncode == 2 and "'response' is missing" in " ".join(done.stderr.split())

    # Intended (the rows really have no reference): scored, and the exit code says no row got a score.
    done = score(inp, out, "--verifier", "math", "--response-field", "completion", "--reference-field", "answr",
                 "--allow-missing-fields")
    ended_with_summary(done, 3)
    assert {r["status"] for r in read_jsonl(out)} == {"invalid_reference"}
    assert "no row has a score" in done.stderr and "invalid_reference" in done.stderr


def test_a_field_most_rows_lack_stops_the_run_too(tmp_path: Path) -> None:
    rows = [{"id": i, "response": "x", **({"gold": "x"} if i == 0 else {"answer": "x"})} for i in range(4)]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    done = score(inp, tmp_path / "out.jsonl", "--verifier", "exact_match", "--reference-field", "gold")
    assert done.returncode == 2 and "'gold' is missing from 3 of the 4 rows" in " ".join(done.stderr.split())
    done = score(inp, tmp_path / "out.jsonl", "--verifier", "exact_match", "--reference-field", "answer")
    ended_with_summary(done, 0)


# --- every case ends ----------------------------------------------------------------------------------------------

def repeat(case: str, runs: int, run: Callable[[int], bool]) -> None:
    with ThreadPoolExecutor(3) as pool:  # the runs race one another for the CPU too, as a loaded box does
        results = list(pool.map(run, range(runs)))
    assert results == [True] * runs, case


def test_no_row_sent_and_all_rows_refused_end_every_time(tmp_path: Path) -> None:
    no_response = write_jsonl(tmp_path / "none.jsonl", [{"id": i, "completion": "x"} for i in range(5)])
    refused = write_jsonl(tmp_path / "refused.jsonl", [{"id": i, "response": "x", "checker": f"nope{i}"}
                                                        for i in range(5)])

    def no_row_sent(k: int) -> bool:
        done = score(no_response, tmp_path / f"none-{k}.jsonl", "--verifier", "math", "--allow-missing-fields",
                     timeout=90)
        ended_with_summary(done, 3)
        return "'response' is missing" in done.stderr

    def all_refused(k: int) -> bool:
        done = score(refused, tmp_path / f"refused-{k}.jsonl", "--verifier-field", "checker", timeout=90)
        ended_with_summary(done, 3)
        return "unknown verifier 'nope0'" in done.stderr

    repeat("no row sent", RUNS, no_row_sent)
    repeat("all rows refused", RUNS, all_refused)


def test_a_server_never_started_ends_every_time(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "response": "x", "reference": "x"} for i in range(5)])

    def never_started(k: int) -> bool:
        url = f"http://127.0.0.1:{free_port()}"
        done = score(inp, tmp_path / f"out-{k}.jsonl", "--verifier", "exact_match", "--url", url, timeout=60,
                     env={"REWARD_CLIENT_FIRST_CONTACT_S": "1"})
        ended_with_summary(done, 1)
        return f"cannot reach {url}: is the service running?" in " ".join(done.stderr.split())

    repeat("server never started", RUNS, never_started)


def test_a_server_never_started_is_named_within_seconds(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "response": "x", "reference": "x"}])
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = score(inp, tmp_path / "out.jsonl", "--verifier", "exact_match", "--url", url, timeout=120)
    assert time.monotonic() - started < 30  # 5 s of tries plus the interpreter's start, not the 300 s budget
    ended_with_summary(done, 1)
    message = " ".join(done.stderr.split())
    assert f"cannot reach {url}: is the service running?" in message and "REWARD_CLIENT_URL" in message
    assert "widen" not in message  # no advice to wait longer for a server that was never there


# --- a server lost mid-run ----------------------------------------------------------------------------------------

class Watched:
    """A score run whose stderr lines are read as they come, with the time each arrived."""

    def __init__(self, inp: Path, out: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(score_cmd(inp, out, *args), env={**cli_env(), **(env or {})}, cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.lines: list[tuple[float, str]] = []
        self.stdout: list[str] = []
        self._readers = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=lambda: self.stdout.extend(self.proc.stdout or ()), daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait(self, timeout: float) -> tuple[int, str]:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with_group_killed(self.proc)
            raise AssertionError(f"score did not end: {self.text()}") from None
        for reader in self._readers:
            reader.join(timeout=10)
        return self.proc.returncode, "".join(self.stdout)

    def first(self, start: str) -> float | None:
        return next((t for t, line in self.lines if line.startswith(start)), None)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_bytes().count(b"\n") >= n):
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended or stalled before the outage"
        time.sleep(0.05)


SLOW = ["--verifier", "test_sleep", "--options", '{"seconds": 0.1}', "--chunk-size", "4", "--concurrency", "1"]


@pytest.fixture()
def restarter(tmp_path: Path) -> Iterator[Restarter]:
    server = Restarter(tmp_path / "server")
    yield server
    server.stop()


def test_a_server_restarted_mid_run_is_waited_for_and_told(tmp_path: Path, restarter: Restarter) -> None:
    rows = [{"id": f"r{i}", "response": "x"} for i in range(80)]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    restarter.start()
    run = Watched(inp, out, *SLOW, "--url", restarter.url)
    wait_for_lines(out, 8, run.proc)
    restarter.stop()
    stopped = time.monotonic()
    # twice the client's longest wait between tries (10 s, full jitter): some try fails after the 10 s between
    # progress lines, whatever the draws
    time.sleep(21.0)
    restarter.start()
    code, stdout = run.wait(timeout=300)
    assert code == 0, run.text()
    assert [r["id"] for r in read_jsonl(out)] == [r["id"] for r in rows]  # every row once, in order
    lost = run.first(f"lost contact with {restarter.url}")
    assert lost is not None and lost - stopped < 5, run.text()  # at the first failure, not when the wait ends
    progress = run.first(f"still no answer from {restarter.url} after")
    assert progress is not None and progress > lost, run.text()
    assert run.first(f"{restarter.url} answers again after") is not None, run.text()
    assert "80" in stdout and "total" in stdout


def test_a_server_gone_for_good_ends_with_the_rows_kept(tmp_path: Path, restarter: Restarter) -> None:
    rows = [{"id": f"r{i}", "response": "x"} for i in range(80)]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    for k in range(3):
        out = tmp_path / f"out-{k}.jsonl"
        restarter.start()
        run = Watched(inp, out, *SLOW, "--url", restarter.url, env={"REWARD_CLIENT_RETRY_BUDGET_S": "3"})
        wait_for_lines(out, 8, run.proc)
        restarter.stop()
        code, stdout = run.wait(timeout=120)
        assert code == 1, run.text()
        assert "total" in stdout and "mean score" in stdout  # the summary of what was scored
        assert run.first(f"lost contact with {restarter.url}") is not None, run.text()
        assert "run the same command to resume" in run.text()
        kept = read_jsonl(out)
        assert 8 <= len(kept) < 80 and [r["id"] for r in kept] == [r["id"] for r in rows[:len(kept)]]
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{restarter.url}/healthz", timeout=2)
