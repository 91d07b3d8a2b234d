"""Labelled and probe audits: the library, the CLI, the HTTP route, and the HTML report rendered in Chromium."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import ROOT, chromium_dom, run_server
from verifiers.audit import AuditInputError, labelled_audit, probe_audit
from verifiers.audit.attacks import FAMILIES, Target, entry_point, gold_text, wrong_answers
from verifiers.audit.probes import generate
from verifiers.calibration import SQLiteCalibrationStore
from verifiers.engine import Engine
from verifiers.engine.registry import build_registry

PLUGINS = ["tests.support.plugins.noisy_verifiers", "tests.support.plugins.testing_verifiers"]

LABELLED = [
    {"response": "Paris", "reference": "paris", "label": True, "id": "tp"},
    {"response": "paris.", "reference": "Paris", "label": True, "id": "fn-punct"},
    {"response": "London", "reference": "Paris", "label": False, "id": "tn"},
    {"response": "", "reference": "Paris", "label": "false", "id": "tn-empty"},
    {"response": "PARIS", "reference": "Paris", "label": 0, "id": "fp-label-says-wrong"},
    {"response": "Paris", "reference": None, "label": 1, "id": "unscored"},
]


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(build_registry(PLUGINS))


def test_labelled_audit_counts_every_cell_and_lists_disagreements(engine: Engine, tmp_path: Path) -> None:
    store = SQLiteCalibrationStore(tmp_path / "c.db")
    report = asyncio.run(labelled_audit(engine, "exact_match", LABELLED, {}, store=store, source="unit"))
    assert report["confusion"] == {"tp": 1, "fp": 1, "tn": 2, "fn": 1}
    assert {d["id"]: d["kind"] for d in report["disagreements"]} == {
        "fn-punct": "false negative", "fp-label-says-wrong": "false positive"}
    assert [u["id"] for u in report["unscored"]] == ["unscored"]  # invalid reference: not the verifier's opinion
    assert report["rho0"]["k"] == 1 and report["rho0"]["n"] == 3 and report["rho1"]["n"] == 2
    cal = store.entries()[0]
    assert str(cal.name) == "exact_match" and cal.counts.fp == 1 and cal.sources == ["unit"]
    assert report["calibration_key"].endswith(cal.options_hash)


@pytest.mark.parametrize("rows, message", [
    ([{"response": "a", "reference": "a", "label": "maybe"}], "row 0: label"),
    ([{"response": "a", "reference": "a"}], "label is missing"),
    ([{"response": 3, "reference": "a", "label": 1}], "response must be a string"),
    ([{"response": "a", "reference": "a", "label": 1, "refrence": "typo"}], "unknown fields"),
])
def test_labelled_audit_rejects_malformed_rows(engine: Engine, rows: list, message: str) -> None:
    with pytest.raises(AuditInputError, match=message):
        asyncio.run(labelled_audit(engine, "exact_match", rows))


def test_audit_refuses_post_processing_options(engine: Engine) -> None:
    with pytest.raises(AuditInputError, match="raw verifier"):
        asyncio.run(labelled_audit(engine, "exact_match", LABELLED, {"correction": "backward"}))


def test_probe_audit_finds_the_leaks_of_a_naive_verifier(engine: Engine) -> None:
    rows = [{"reference": "1728"}, {"reference": "Paris"}, {"reference": "\\frac{1}{3}"}]
    report = asyncio.run(probe_audit(engine, "test_contains", rows))
    fams = report["families"]
    assert set(fams) == {"judge_hacking", "hedged", "gold_in_reasoning", "empty", "overlong", "prompt_injection"}
    # a substring check rewards every hedge and every gold-in-reasoning probe, and a spray of candidates
    assert fams["hedged"]["fp"] == fams["hedged"]["n"] > 0
    assert fams["gold_in_reasoning"]["fp"] == fams["gold_in_reasoning"]["n"] > 0
    assert fams["overlong"]["fp"] >= fams["overlong"]["n"] // 2
    # but master keys and empty answers never contain the gold
    assert fams["judge_hacking"]["fp"] == 0 and fams["empty"]["fp"] == 0
    assert fams["hedged"]["fp_rate"]["value"] == 1.0 and fams["hedged"]["examples"]
    assert report["n_probes"] == sum(s["n"] + s["unscored"] for s in fams.values())


def test_probe_audit_of_exact_match_has_no_false_positives(engine: Engine) -> None:
    rows = [{"reference": "42"}, {"reference": "Paris"}, {"reference": ["B", "b"]}]
    report = asyncio.run(probe_audit(engine, "exact_match", rows, per_family=4, seed=3))
    assert report["fp_rate"]["k"] == 0 and report["fp_rate"]["n"] > 40
    assert all(s["n"] + s["unscored"] == 4 * len(rows) or name == "overlong"
               for name, s in report["families"].items())


def test_multiple_choice_hedges_are_no_longer_rewarded(engine: Engine) -> None:
    """The probe audit once found 'The answer is B or C.' read as choosing B; the hedged family must now be clean."""
    report = asyncio.run(probe_audit(engine, "multiple_choice", [{"reference": "B"}, {"reference": "D"}],
                                     families=["hedged"]))
    hedged = report["families"]["hedged"]
    assert hedged["n"] == 28 and hedged["fp"] == 0, hedged["examples"]


def test_attack_generators_are_wrong_and_well_formed() -> None:
    import random

    rng = random.Random(0)
    golds = ["1728", "\\frac{1}{3}", "-4", "B", "Paris", "x^2+1", "(1, 2)"]
    for gold in golds:
        wrong = wrong_answers(gold, golds, rng)
        assert wrong and all(w.strip() != gold.strip() for w in wrong)
        target = Target(gold, wrong, "add", rng)
        for family, make in FAMILIES.items():
            probes = make(target)
            assert probes, family
            assert len({v for v, _ in probes}) == len(probes), f"{family}: variant names must be unique"
    assert gold_text({"answer": 12}) == "12" and gold_text(["a", "b"]) == "a"
    assert entry_point({"entry_point": "f"}) == "f"
    assert entry_point({"test_list": ["assert remove_Occ('hello','l') == 'heo'"]}) == "remove_Occ"
    for variant, code in FAMILIES["code_harness"](Target("x", ["y"], "remove_Occ")):
        body = code.removeprefix("```python\n").removesuffix("```")
        compile(body, variant, "exec")  # every harness attack is valid Python
        assert "def remove_Occ(" in body
    with pytest.raises(AuditInputError, match="unknown probe families"):
        generate(["1"], ("nope",))


def test_attack_generators_on_real_math_answers(shared_data: Path) -> None:
    import random

    rows = [json.loads(line) for line in (shared_data / "math" / "math500.test.jsonl").read_text().splitlines()]
    golds = [r["answer"] for r in rows]
    probes = generate(golds, ("hedged", "gold_in_reasoning"), seed=1)
    assert len(probes) == len(golds) * (14 + 10)
    rng = random.Random(2)
    for gold in golds:
        assert all(w.replace(" ", "") != gold.replace(" ", "") for w in wrong_answers(gold, golds, rng))


# --- CLI, report rendering and the HTTP route ---------------------------------------------------------------------

def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "REWARD_SERVICE_EXTRA_VERIFIER_MODULES": json.dumps(PLUGINS),
                **(env or {})}
    return subprocess.run([sys.executable, "-m", "reward_service", "audit", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=300)


def _dump_dom(html: Path, tmp_path: Path) -> str:
    return chromium_dom(html.resolve().as_uri(), tmp_path / "chromium-profile", what="the report")


def test_cli_writes_reports_that_render_in_chromium(tmp_path: Path) -> None:
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(r) + "\n" for r in LABELLED))
    db = tmp_path / "cal.db"
    done = _cli("labelled", "--verifier", "exact_match", "--input", str(labelled), "--out", str(tmp_path / "lab"),
                "--store", "--db", str(db), "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "TP 1 FP 1 TN 2 FN 1" in done.stdout
    assert SQLiteCalibrationStore(db).entries()[0].sources == ["labelled:labelled.jsonl"]
    report = json.loads((tmp_path / "lab" / "report.json").read_text())
    assert report["confusion"] == {"tp": 1, "fp": 1, "tn": 2, "fn": 1}

    html = (tmp_path / "lab" / "report.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the report must not load network assets"
    dom = _dump_dom(tmp_path / "lab" / "report.html", tmp_path)
    cells = dict(re.findall(r'<text class="cm-count" data-cell="(\w+)"[^>]*>(\d+)</text>', dom))
    assert cells == {"tp": "1", "fn": "1", "fp": "1", "tn": "2"}
    assert 'id="rates-chart"' in dom and dom.count('class="bar"') == 2
    assert "fp-label-says-wrong" in dom

    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"reference": "1728"}\n{"reference": "Paris"}\n')
    done = _cli("probes", "--verifier", "test_contains", "--input", str(refs), "--out", str(tmp_path / "probes"),
                "--families", "hedged,empty,prompt_injection", "--workers", "1")
    assert done.returncode == 0, done.stderr
    dom = _dump_dom(tmp_path / "probes" / "report.html", tmp_path)
    bars = dict(re.findall(r'<rect class="bar" data-label="(\w+)" data-value="([\d.]+)"', dom))
    assert set(bars) == {"hedged", "empty", "prompt_injection"} and float(bars["hedged"]) == 1.0
    assert float(bars["empty"]) == 0.0

    bad = _cli("probes", "--verifier", "test_contains", "--input", str(refs), "--out", str(tmp_path / "x"),
               "--families", "nope", "--workers", "1")
    assert bad.returncode == 2 and "unknown probe families" in bad.stderr


def test_http_audit_store_and_corrected_verify(tmp_path: Path) -> None:
    env = {"REWARD_SERVICE_CALIBRATION_DB": str(tmp_path / "server-cal.db"),
           "REWARD_SERVICE_EXTRA_VERIFIER_MODULES": json.dumps(PLUGINS)}
    noisy = {"rho0": 0.1, "rho1": 0.2, "seed": 5}
    rows = [{"response": f"r{i}", "reference": {"truth": i % 2}, "label": i % 2} for i in range(400)]
    with run_server(tmp_path, env) as server, server.client() as client:
        # before any calibration: a correction is an error for that item, the rest of the batch is scored
        r = client.post("/v1/verify", json={"items": [
            {"verifier": "test_noisy", "response": "a", "reference": {"truth": 1},
             "options": {**noisy, "correction": "backward"}},
            {"verifier": "exact_match", "response": "a", "reference": "a"},
        ]})
        assert r.status_code == 200
        first, second = r.json()["results"]
        assert first["status"] == "error" and first["score"] is None and "no calibration" in first["reason"]
        assert second["status"] == "ok" and second["score"] == 1.0

        r = client.post("/v1/audit", json={"kind": "labelled", "verifier": "test_noisy", "options": noisy,
                                           "items": rows, "store": True, "source": "http-test"})
        assert r.status_code == 200, r.text
        report = r.json()
        assert sum(report["confusion"].values()) == 400

        entries = client.get("/v1/calibration").json()["entries"]
        assert [e["sources"] for e in entries] == [["http-test"]]
        assert entries[0]["rho0"]["value"] == report["rho0"]["value"]

        r = client.post("/v1/verify", json={"items": [
            {"verifier": "test_noisy", "response": f"t{i}", "reference": {"truth": 1},
             "options": {**noisy, "correction": "backward"}} for i in range(20)
        ]})
        results = r.json()["results"]
        rho0, rho1 = report["rho0"]["value"], report["rho1"]["value"]
        for res in results:
            assert res["status"] == "ok"
            raw = res["details"]["raw"]["score"]
            assert res["score"] == pytest.approx((raw - rho0) / (1 - rho0 - rho1))

        r = client.post("/v1/audit", json={"kind": "probes", "verifier": "test_contains", "format": "html",
                                           "items": [{"reference": "1728"}], "families": ["hedged", "empty"]})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert 'id="family-fp-chart"' in r.text

        bad = client.post("/v1/audit", json={"kind": "labelled", "verifier": "exact_match",
                                             "items": [{"response": "a", "reference": "a", "label": "perhaps"}]})
        assert bad.status_code == 422 and bad.json()["loc"] == ["items", 0]
        bad = client.post("/v1/audit", json={"kind": "probes", "verifier": "exact_match",
                                             "items": [{"reference": "a"}], "families": ["nope"]})
        assert bad.status_code == 422 and "unknown probe families" in bad.json()["detail"]
        bad = client.post("/v1/audit", json={"kind": "probes", "verifier": "no_such_verifier",
                                             "items": [{"reference": "a"}]})
        assert bad.status_code == 422 and "unknown verifier" in bad.json()["detail"]
        big = client.post("/v1/audit", json={"kind": "probes", "verifier": "exact_match",
                                             "items": [{"reference": str(i)} for i in range(200)]})
        assert big.status_code == 413
