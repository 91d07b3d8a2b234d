"""``reward-service audit diff``: the real command in a subprocess on real ProcessBench rollouts, checked against
the two verifiers run independently in this process; the report's escaping; usage errors."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import ROOT
from verifiers.audit.diff import DiffTally, category
from verifiers.engine import Engine
from verifiers.engine.registry import build_registry
from verifiers.types import VerifyItem

XSS_ID = "xss-<i>&"
# A hedge: ``math`` refuses it, Math-Verify takes the last candidate; the two must disagree on it.
XSS_RESPONSE = "<script>alert('pwned')</script> It could be 3; it could also be 4."


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "REWARD_SERVICE_LOG_LEVEL": "WARNING", "REWARD_SERVICE_ITEM_TIMEOUT_S": "120"}
    return subprocess.run([sys.executable, "-m", "reward_service", "audit", "diff", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """40 real rows (20 spread over the file, 20 olympiad rows with symbolic answers, where graders differ most),
    a hostile row and one without a response."""
    source = read_jsonl(shared_data / "math" / "processbench_answers.jsonl")
    symbolic = [r for r in source if r["source"] in ("omnimath", "olympiadbench")
                and not re.fullmatch(r"-?[\d.,]+", r["reference"].strip())]
    rows: list[dict[str, Any]] = [{"id": r["id"], "response": r["response"], "reference": r["reference"]}
                                  for r in source[::170][:20] + symbolic[5::38][:20]]
    rows.insert(7, {"id": XSS_ID, "response": XSS_RESPONSE, "reference": "4"})
    rows.append({"id": "no-response", "reference": "4"})
    path = tmp_path_factory.mktemp("diff") / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def independent_categories(rows: list[dict[str, Any]], name: str) -> list[str]:
    """The verdicts recomputed in this process, read as the report reads them (a score, or the status)."""
    engine = Engine(build_registry())
    verdicts = asyncio.run(engine.verify_many([VerifyItem(name, r["response"], r["reference"]) for r in rows]))
    return [f"{v.score:g}" if v.score is not None else v.status.value for v in verdicts]


def test_diff_math_against_math_verify(rollouts: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = cli(str(rollouts), "--verifier", "math", "--against", "math_verify", "--out", str(out), "--workers", "2",
               "--chunk-size", "8")
    assert done.returncode == 0, done.stderr[-3000:]

    rows = [r for r in read_jsonl(rollouts) if "response" in r]
    ours, theirs = independent_categories(rows, "math"), independent_categories(rows, "math_verify")
    expected = {r["id"]: (a, b) for r, a, b in zip(rows, ours, theirs) if a != b}
    assert XSS_ID in expected, "the hedged row should split the two verifiers"
    agree = len(rows) - len(expected)
    assert f"agreement: {agree}/{len(rows)} rows ({agree / len(rows):.2%}) between math and math_verify" in done.stdout

    disagreements = read_jsonl(out / "disagreements.jsonl")
    assert [d["id"] for d in disagreements] == [r["id"] for r in rows if r["id"] in expected]  # input order
    positions = {r["id"]: i for i, r in enumerate(read_jsonl(rollouts))}
    for d in disagreements:
        assert (d["pair"]["verifier"], d["pair"]["against"]) == expected[d["id"]]
        assert d["index"] == positions[d["id"]]
        assert (category(d["verifier"]), category(d["against"])) == expected[d["id"]]
        assert d["verifier"]["name"] == "math" and d["against"]["name"] == "math_verify"
        assert d["verifier"]["reason"] and d["against"]["reason"]
        assert d["response_tail"] and len(d["response_tail"]) <= 2000
    xss = next(d for d in disagreements if d["id"] == XSS_ID)
    assert xss["verifier"]["status"] == "rejected" and xss["against"]["extracted"]
    assert xss["response_tail"] == XSS_RESPONSE and xss["reference"] == "4"

    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rows"], summary["agree"], summary["disagree"], summary["skipped"]) == (
        len(rows), agree, len(expected), 1)
    assert summary["skipped_rows"][0]["id"] == "no-response"
    assert {(p["verifier"], p["against"]): p["rows"] for p in summary["pairs"]} == dict(Counter(zip(ours, theirs)))

    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html.lower() and escape(XSS_RESPONSE) in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the report must not load network assets"
    for d in disagreements:
        assert escape(str(d["id"])) in html
    assert html.count('<section class="card"') == len(disagreements)


def test_unknown_verifier_is_a_usage_error(rollouts: Path, tmp_path: Path) -> None:
    for flags, hint in ((("--verifier", "no_such_verifier", "--against", "math_verify"), "--verifier"),
                        (("--verifier", "math", "--against", "no_such_verifier"), "--against")):
        done = cli(str(rollouts), *flags, "--out", str(tmp_path / "x"), "--workers", "1")
        assert done.returncode == 2, done.stderr
        assert "unknown verifier 'no_such_verifier'" in done.stderr and hint in done.stderr
        assert "Traceback" not in done.stderr
    bad = cli(str(rollouts), "-v", "math", "--against", "math_verify", "--against-options", '{"strict": "maybe"}',
              "--out", str(tmp_path / "x"), "--workers", "1")
    assert bad.returncode == 2 and "strict" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "x").exists()


def test_unscored_verdicts_are_their_own_category() -> None:
    tally = DiffTally(("a", "b"))
    ok0, ok1 = {"status": "ok", "score": 0.0}, {"status": "ok", "score": 1.0}
    cases = [
        (ok0, {"status": "no_answer", "score": 0.0}, None),  # the same reward
        (ok0, {"status": "timeout", "score": None}, ("0", "timeout")),  # never read as 0
        ({"status": "invalid_reference", "score": None}, ok0, ("invalid_reference", "0")),
        ({"status": "error", "score": None}, {"status": "error", "score": None}, None),
        (ok1, ok0, ("1", "0")),
    ]
    for k, (a, b, pair) in enumerate(cases):
        record = tally.add(k, str(k), "response", "ref", a, b, 10)
        assert (None if record is None else (record["pair"]["verifier"], record["pair"]["against"])) == pair
    assert (tally.rows, tally.agree) == (5, 2)
    assert tally.agreement_line().startswith("agreement: 2/5 rows (40.00%)")
