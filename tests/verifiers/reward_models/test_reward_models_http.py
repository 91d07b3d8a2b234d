"""Reward models through the real server: /v1/prm/score, the prm/orm verifiers, readiness gating, and prm-eval
end to end, all on tiny random Qwen2 models written to disk and loaded by the service's own loading code."""
from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ROOT, LiveServer, free_port, run_server

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.support.reward_models import build_model, model_env


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rm_http")
    return {
        "prm": build_model(root / "prm", "token_classification", seed=11),
        "shepherd": build_model(root / "shepherd", "causal_lm", seed=12),
        "orm": build_model(root / "orm", "sequence_classification", seed=13, num_labels=1),
    }


def _specs(dirs: dict[str, Path]) -> list[dict]:
    return [
        {"name": "qwen-prm", "path": str(dirs["prm"]), "format": "separator", "max_batch_tokens": 4096,
         "max_wait_ms": 20, "max_length": 400},
        {"name": "shepherd", "path": str(dirs["shepherd"]), "format": "step_tag", "split": "step_prefix"},
        {"name": "orm", "path": str(dirs["orm"]), "format": "sequence_classification"},
    ]


@pytest.fixture(scope="module")
def rm_server(dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with run_server(tmp_path_factory.mktemp("rm_srv"), model_env(_specs(dirs))) as live:
        yield live


@pytest.fixture(scope="module")
def reference_prm(dirs: dict[str, Path]):
    """The same model loaded in the test process, scored one item at a time: the ground truth."""
    from verifiers.kinds.reward_models.loading import load_model
    from verifiers.kinds.reward_models.spec import ModelSpec

    return load_model(ModelSpec(**_specs(dirs)[0]))


STEPS = ["Natalia sold 48 / 2 = 24 clips in May.", "Altogether 48 + 24 = 72 clips.", "The answer is 72."]


def score(server: LiveServer, body: dict) -> httpx.Response:
    with server.client() as c:
        return c.post("/v1/prm/score", json=body)


def test_prm_score_steps_and_response(rm_server: LiveServer, reference_prm) -> None:
    body = {"model": "qwen-prm", "aggregation": "min", "items": [
        {"id": "a", "prompt": "How many clips?", "steps": STEPS},
        {"id": "b", "prompt": "How many clips?", "response": "\n\n".join(STEPS)},
        {"id": "c", "prompt": "Solve 3x + 5 = 20.", "steps": ["3x = 15", "x = 5"]},
        {"id": "empty", "prompt": "p", "response": " \n\n "},
    ]}
    r = score(rm_server, body)
    assert r.status_code == 200, r.text
    res = {x["id"]: x for x in r.json()["results"]}
    assert [x["id"] for x in r.json()["results"]] == ["a", "b", "c", "empty"]
    assert len(res["a"]["step_scores"]) == 3 and len(res["c"]["step_scores"]) == 2
    assert res["b"]["step_scores"] == pytest.approx(res["a"]["step_scores"], abs=1e-5)  # split == given list
    want = reference_prm.run(reference_prm.encoder.encode_steps([("How many clips?", STEPS)]))[0]
    assert res["a"]["step_scores"] == pytest.approx(want, abs=1e-4)
    assert res["a"]["score"] == pytest.approx(min(want), abs=1e-4)
    fe = next((i for i, x in enumerate(want) if x < 0.5), None)
    assert res["a"]["first_error"] == fe
    assert res["empty"]["status"] == "no_answer" and res["empty"]["score"] == 0.0


def _prm_items_counted(server: LiveServer) -> dict[str, float]:
    with server.client() as c:
        text = c.get("/metrics").text
    found = {}
    for line in text.splitlines():
        if line.startswith("reward_items_total{") and 'verifier="prm"' in line:
            found[line.split('status="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return found


def test_prm_score_runs_through_the_engine(rm_server: LiveServer) -> None:
    """Each item is a ``prm`` verifier item: counted once in the item metrics, like /v1/verify's items."""
    before = _prm_items_counted(rm_server)
    body = {"model": "qwen-prm", "items": [{"prompt": "q", "steps": STEPS}, {"prompt": "q", "response": "a\n\nb"},
                                           {"prompt": "q", "response": "  "}]}
    r = score(rm_server, body)
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()["results"]] == ["ok", "ok", "no_answer"]
    after = _prm_items_counted(rm_server)
    assert after.get("ok", 0) - before.get("ok", 0) == 2
    assert after.get("no_answer", 0) - before.get("no_answer", 0) == 1


def test_aggregations_and_threshold_over_http(rm_server: LiveServer) -> None:
    base = {"model": "qwen-prm", "items": [{"prompt": "q", "steps": STEPS}]}
    got = {}
    for how in ("min", "prod", "mean", "last", "sum", "clip", "delta"):
        r = score(rm_server, {**base, "aggregation": how, "threshold": 0.6})
        assert r.status_code == 200, r.text
        got[how] = r.json()["results"][0]
    s = got["min"]["step_scores"]
    assert got["prod"]["score"] == pytest.approx(s[0] * s[1] * s[2])
    assert got["mean"]["score"] == pytest.approx(sum(s) / 3)
    assert got["last"]["score"] == pytest.approx(s[2])
    assert got["sum"]["score"] == pytest.approx(sum(s))
    assert got["clip"]["score"] == pytest.approx(sum(min(x - 0.6, 0) for x in s))
    assert got["delta"]["step_rewards"] == pytest.approx([s[0] - s[1], s[1], 0.0])
    assert got["delta"]["score"] == pytest.approx(s[0])
    assert got["min"]["first_error"] == next((i for i, x in enumerate(s) if x < 0.6), None)


def test_step_tag_model_and_split_rule(rm_server: LiveServer) -> None:
    text = "Step 1: 48 / 2 = 24.\nStep 2: 48 + 24 = 72.\nStep 3: so 72 ки ки."
    r = score(rm_server, {"model": "shepherd", "aggregation": "prod", "items": [{"prompt": "q", "response": text}]})
    assert r.status_code == 200, r.text
    [res] = r.json()["results"]
    assert len(res["step_scores"]) == 3  # the model's split rule (step_prefix); planted tags add no steps
    assert all(0 < x < 1 for x in res["step_scores"])


def test_bad_requests_are_clear_4xx(rm_server: LiveServer) -> None:
    cases = [
        ({"model": "nope", "items": [{"prompt": "q", "steps": ["a"]}]}, "unknown reward model"),
        ({"model": "orm", "items": [{"prompt": "q", "steps": ["a"]}]}, "outcome model"),
        ({"model": "qwen-prm", "items": [{"prompt": "q"}]}, "exactly one of"),
        ({"model": "qwen-prm", "items": [{"prompt": "q", "steps": ["a"], "response": "a"}]}, "exactly one of"),
        ({"model": "qwen-prm", "items": [{"prompt": "q", "steps": []}]}, "at least one step"),
        ({"model": "qwen-prm", "items": []}, "at least one item"),
        ({"model": "qwen-prm", "aggregation": "median", "items": [{"prompt": "q", "steps": ["a"]}]}, "aggregation"),
    ]
    for body, needle in cases:
        r = score(rm_server, body)
        assert r.status_code == 422, (body, r.text)
        assert needle in r.text, (needle, r.text)


def test_one_too_long_item_does_not_sink_the_batch(rm_server: LiveServer) -> None:
    items = [{"id": "ok", "prompt": "q", "steps": ["a = 1"]},
             {"id": "long", "prompt": "q", "steps": ["48 + 24 = 72. " * 200]}]
    r = score(rm_server, {"model": "qwen-prm", "items": items})
    assert r.status_code == 200, r.text
    ok, long = r.json()["results"]
    assert ok["status"] == "ok" and ok["score"] is not None
    assert long["status"] == "error" and long["score"] is None and "exceeds" in long["reason"]


def test_concurrent_clients_are_merged_and_match_single_scores(rm_server: LiveServer, reference_prm) -> None:
    prompts = [(f"Problem {i}: add {i} and {2 * i}.", [f"{i} + {2 * i} = {3 * i}."] * (1 + i % 4)) for i in range(24)]
    want = [reference_prm.run(reference_prm.encoder.encode_steps([p]))[0] for p in prompts]

    def one(i: int) -> list[float]:
        p, steps = prompts[i]
        r = score(rm_server, {"model": "qwen-prm", "items": [{"prompt": p, "steps": steps}]})
        assert r.status_code == 200, r.text
        return r.json()["results"][0]["step_scores"]

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        got = list(pool.map(one, range(len(prompts))))
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=1e-4)


def test_prm_and_orm_as_verifiers(rm_server: LiveServer) -> None:
    items = [
        {"id": "p", "verifier": "prm", "response": "\n\n".join(STEPS), "reference": "How many clips?",
         "options": {"model": "qwen-prm", "aggregation": "last"}},
        {"id": "p_default", "verifier": "prm", "response": "\n\n".join(STEPS),
         "reference": {"prompt": "How many clips?"}},
        {"id": "o", "verifier": "orm", "response": "The answer is 72.", "reference": "How many clips?"},
        {"id": "o2", "verifier": "orm", "response": "It is 71.", "reference": "How many clips?"},
        {"id": "wrongkind", "verifier": "orm", "response": "x", "options": {"model": "qwen-prm"}},
        {"id": "nosteps", "verifier": "prm", "response": "   "},
    ]
    with rm_server.client() as c:
        r = c.post("/v1/verify", json={"items": items})
    assert r.status_code == 200, r.text
    res = {x["id"]: x for x in r.json()["results"]}
    assert res["p"]["status"] == "ok" and res["p"]["score"] == pytest.approx(res["p"]["details"]["step_scores"][-1])
    assert res["p_default"]["details"]["model"] == "qwen-prm"
    assert res["p_default"]["score"] == pytest.approx(min(res["p"]["details"]["step_scores"]))
    assert res["o"]["status"] == "ok" and res["o2"]["status"] == "ok" and res["o"]["score"] != res["o2"]["score"]
    assert res["wrongkind"]["status"] == "unavailable" and res["wrongkind"]["score"] is None
    assert res["nosteps"]["status"] == "no_answer"


def _start(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    full = {**os.environ, "PYTHONPATH": str(ROOT), "REWARD_SERVICE_WORKERS": "1", **env}
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "reward_service", "serve", "--port", str(port)],
                                env=full, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def test_readyz_stays_503_while_a_model_cannot_load(dirs: dict[str, Path], tmp_path: Path) -> None:
    specs = [_specs(dirs)[0], {"name": "missing", "path": str(tmp_path / "no-such-model"), "format": "separator"}]
    proc, url = _start(model_env(specs), tmp_path / "server.log")
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
        r = httpx.get(f"{url}/readyz", timeout=5)
        assert r.status_code == 503 and "models" in r.json()["waiting_for"]
        loaded = False
        for _ in range(300):  # the good model comes up; readiness stays off because of the missing one
            r = httpx.post(f"{url}/v1/prm/score",
                           json={"model": "qwen-prm", "items": [{"prompt": "q", "steps": ["a"]}]}, timeout=30)
            if r.status_code == 200:
                loaded = True
                break
            assert r.status_code == 503 and r.headers.get("retry-after"), r.text
            time.sleep(0.1)
        assert loaded
        assert httpx.get(f"{url}/readyz", timeout=5).status_code == 503
        r = httpx.post(f"{url}/v1/prm/score", json={"model": "missing", "items": [{"prompt": "q", "steps": ["a"]}]},
                       timeout=30)
        assert r.status_code == 503 and "failed to load" in r.json()["detail"]
        r = httpx.post(f"{url}/v1/verify",
                       json={"items": [{"verifier": "exact_match", "response": "a", "reference": "a"}]}, timeout=30)
        assert r.status_code == 200 and r.json()["results"][0]["score"] == 1.0  # the rest of the service works
        log = (tmp_path / "server.log").read_text()
        assert "ready on" not in log, log  # the log says what /readyz says
        assert re.search(r"not ready yet, /readyz waits for: .*models", log), log
        assert re.search(r"not ready: models: .*missing", log), log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_prm_eval_end_to_end(dirs: dict[str, Path], shared_data: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **model_env(_specs(dirs)[:1])}
    out = subprocess.run(
        [sys.executable, "-m", "reward_service", "prm-eval", "--model", "qwen-prm", "--subsets", "gsm8k,math",
         "--limit", "12", "--json", "--data-dir", str(shared_data / "prm")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert [r["subset"] for r in report["subsets"]] == ["gsm8k", "math"]
    for row in report["subsets"]:
        samples = json.loads((shared_data / "prm" / f"processbench_{row['subset']}.json").read_text())[:12]
        n_err = sum(1 for s in samples if s["label"] != -1)
        # the tiny model's 400-token limit leaves long samples unscored; they are counted, not silently dropped
        assert row["n_error"] + row["n_correct"] + row["failed"] == 12
        assert row["n_error"] <= n_err
        for key in ("error_acc", "correct_acc", "f1"):
            assert row[key] is None or 0.0 <= row[key] <= 1.0
    bad = subprocess.run([sys.executable, "-m", "reward_service", "prm-eval", "--model", "nope", "--data-dir",
                          str(shared_data / "prm")], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "not configured" in bad.stderr
