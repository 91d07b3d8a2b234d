"""The README's tour, run as written against a live server on the embedded defaults: every curl answers what its
comment says, the Python example runs, the rollout-file example scores, and the reward-model step works once the
model it names is configured (here a tiny one under the README's own specification)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import ROOT, LiveServer, run_server

README = ROOT / "README.md"
DEFAULT_URL = "http://127.0.0.1:8000"
STATUS = r"(ok|rejected|unavailable|no_answer|invalid_reference|error|timeout)"
SCORE = r"(null|-?\d+(?:\.\d+)?)"


def tour_blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the tour section."""
    text = README.read_text()
    start = text.index("## A 5-minute tour")
    section = text[start:text.index("\n## ", start + 1)]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)  # fences open a line


def blocks_with(language: str, needle: str) -> list[str]:
    return [body for lang, body in tour_blocks() if lang == language and needle in body]


def shell(script: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
           "REWARD_SERVICE_WORKERS": "2", "REWARD_SERVICE_LOG_LEVEL": "WARNING"}
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def on(block: str, url: str) -> str:
    """The block aimed at ``url`` instead of the default port."""
    return block.replace("localhost:8000", url.removeprefix("http://")).replace(DEFAULT_URL, url)


def score_value(text: str) -> float | None:
    return None if text == "null" else float(text)


def check_comment(comment: str, body: Any) -> int:
    """Every verdict the comment names (``ok 1.0 "reason"``, ``"score": 1.0, "status": "ok"``, ``"status": "ok"``)
    is among the answer's; the number of claims checked."""
    results = body["results"] if isinstance(body, dict) and "results" in body else [body]
    claims = 0
    for status, score, reason in re.findall(rf'\b{STATUS} {SCORE}(?: "([^"]*)")?', comment):
        want = score_value(score)
        prefix = reason.split("...")[0]
        assert any(r.get("status") == status and (r.get("score") == want if want is None else
                                                  r.get("score") is not None and abs(r["score"] - want) < 1e-3)
                   and str(r.get("reason", "")).startswith(prefix) for r in results), (comment, results)
        claims += 1
    for score, status in re.findall(rf'"score": {SCORE}, "status": "(\w+)"', comment):
        assert any(r.get("status") == status and r.get("score") == score_value(score) for r in results), results
        claims += 1
    for status in re.findall(r'"status": "(\w+)"', comment):
        assert any(r.get("status") == status for r in results), (comment, results)
        claims += 1
    return claims


@pytest.fixture(scope="module")
def tour_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The embedded defaults plus the reward model the tour names, configured as the README says, with the path of a
    tiny model built here instead of the 7B checkpoint."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.support.reward_models import build_model, model_env

    (serve,) = blocks_with("bash", "REWARD_SERVICE_REWARD_MODELS=")
    specs = json.loads(re.search(r"REWARD_SERVICE_REWARD_MODELS='([^']*)'", serve).group(1))
    root = tmp_path_factory.mktemp("tour")
    specs[0]["path"] = str(build_model(root / "prm", "token_classification", seed=3))
    with run_server(root, model_env(specs)) as live:
        yield live


def test_every_curl_of_the_tour_answers_what_its_comment_says(tour_server: LiveServer) -> None:
    curls = [b for lang, b in tour_blocks() if lang == "bash" and b.startswith("curl ")]
    assert len(curls) >= 10  # the extraction found the tour
    for block in curls:
        done = shell(on(block, tour_server.url))
        assert done.returncode == 0, (block, done.stderr)
        body = json.loads(done.stdout)
        assert "detail" not in body, (block, body)  # an error answer, not a verdict
        comment = " ".join(line.lstrip("# ") for line in block.splitlines() if line.startswith("#"))
        assert check_comment(comment, body) >= 1, f"nothing checked in: {comment}"


def test_the_reward_model_step_says_what_a_server_without_one_answers(server: LiveServer) -> None:
    (prm,) = [b for b in blocks_with("bash", "/v1/prm/score") if b.startswith("curl ")]
    done = shell(on(prm, server.url))
    body = json.loads(done.stdout)
    said = re.search(r"answers 422 \(`([^`]*)`\)", " ".join(README.read_text().split())).group(1)
    assert body["detail"] == said


def test_the_python_example_runs_as_written(tour_server: LiveServer) -> None:
    (example,) = blocks_with("python", "RewardClient(")
    done = subprocess.run([sys.executable, "-c", on(example, tour_server.url)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    printed = re.search(r"^print\(scores\)\s+# (.*)$", example, re.MULTILINE).group(1)
    assert done.stdout.strip() == printed


def test_the_rollout_file_example_runs_as_written(tour_server: LiveServer, tmp_path: Path) -> None:
    """As written, from a checkout: it scores, and its files land in a scratch folder, not in the checkout."""
    pq = pytest.importorskip("pyarrow.parquet")
    (example,) = blocks_with("bash", "reward-service score")
    checkout, scratch = tmp_path / "checkout", tmp_path / "tmp"
    checkout.mkdir()
    scratch.mkdir()
    done = shell(f"export TMPDIR={scratch}\n{example}", cwd=checkout)
    assert done.returncode == 0, done.stderr
    assert "0.5000" in done.stdout  # the mean its comment gives
    assert list(checkout.iterdir()) == [], "the tour left files in the checkout"
    (out,) = scratch.glob("*/scored.parquet")
    rows = pq.read_table(out).to_pylist()
    assert [(r["id"], r["status"], r["score"]) for r in rows] == [("q1-a", "ok", 1.0), ("q1-b", "ok", 0.0)]
    assert "Unknown child process" not in done.stderr
    # and through the server, as the text before it says (its --url, aimed at this test's port)
    done = shell(f"export TMPDIR={scratch}\n" + example.replace(
        "--reference-field answer", f"--reference-field answer --url {tour_server.url} --overwrite"), cwd=checkout)
    assert done.returncode == 0, done.stderr
    assert list(checkout.iterdir()) == []
    (other,) = [p for p in scratch.glob("*/scored.parquet") if p != out]
    assert pq.read_table(other).to_pylist() == rows
