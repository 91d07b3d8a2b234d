"""Deployment artefacts, exercised as far as this machine allows: no Docker engine runs here, so no image is
built; the compose file is validated by the compose CLI when present, and the images' entrypoint, environment and
health check are run outside Docker exactly as the Dockerfile states them."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from reward_service.settings import FLAT_NAMES
from tests.support.deploy import compose_cli
from tests.support.server import ROOT, free_port, run_server

DOCKERFILES = [ROOT / "Dockerfile", ROOT / "Dockerfile.gpu"]


def dockerfile_stages(path: Path) -> list[list[str]]:
    """Instructions per stage, continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def instruction(stage: list[str], name: str) -> list[str]:
    return [line[len(name) + 1:].strip() for line in stage if line.upper().startswith(name + " ")]


def parse_env(stage: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for body in instruction(stage, "ENV"):
        for key, value in re.findall(r"(\w+)=(\S+)", body):
            env[key] = value
    return env


def test_compose_file_validates() -> None:
    cli = compose_cli()
    if cli is None:
        pytest.skip("no docker compose CLI on this host: compose file not validated by compose itself")
    for profiles in ([], ["--profile", "gpu", "--profile", "judge"]):
        r = subprocess.run([*cli, "-f", str(ROOT / "docker-compose.yml"), *profiles, "config"],
                           capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr
    services = subprocess.run([*cli, "-f", str(ROOT / "docker-compose.yml"), "--profile", "gpu", "--profile",
                               "judge", "config", "--services"], capture_output=True, text=True, cwd=ROOT)
    assert set(services.stdout.split()) == {"reward-service", "reward-service-gpu", "judge"}


def test_compose_settings_are_real_settings() -> None:
    """Every REWARD_SERVICE_* variable the compose file sets must be a setting (a typo would be silently ignored)."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    fields = set(FLAT_NAMES)  # the flat names every source speaks (the blocks regroup them)
    seen = 0
    for name, service in compose["services"].items():
        for key in service.get("environment", {}):
            if key.startswith("REWARD_SERVICE_"):
                seen += 1
                assert key.removeprefix("REWARD_SERVICE_").lower() in fields, f"{name}: {key} is not a setting"
    assert seen >= 5
    sec = compose["services"]["reward-service"]["security_opt"]
    assert "seccomp=unconfined" in sec and "systempaths=unconfined" in sec
    assert "calibration" in compose["volumes"] and "model-cache" in compose["volumes"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_images_are_multistage_nonroot_with_healthcheck(dockerfile: Path) -> None:
    stages = dockerfile_stages(dockerfile)
    assert len(stages) >= 2, "build and runtime stages"
    runtime = stages[-1]
    assert instruction(runtime, "USER") == ["reward"]
    assert instruction(runtime, "HEALTHCHECK"), "health check"
    installs = " ".join(instruction(runtime, "RUN"))
    assert "bubblewrap" in installs
    for tool in ("build-essential", "gcc ", "g++", "python3-dev"):
        assert tool not in installs, f"build tool {tool} in the runtime stage"
    assert json.loads(instruction(runtime, "ENTRYPOINT")[0]) == ["reward-service", "serve"]


def test_entrypoint_env_and_healthcheck_outside_docker(tmp_path: Path) -> None:
    """Run the CPU image's ENTRYPOINT with its ENV (port moved to a free one) and its HEALTHCHECK command."""
    runtime = dockerfile_stages(ROOT / "Dockerfile")[-1]
    entry = json.loads(instruction(runtime, "ENTRYPOINT")[0])
    env = {**os.environ, **parse_env(runtime), "REWARD_SERVICE_PORT": str(free_port()), "REWARD_SERVICE_WORKERS": "1"}
    assert env["REWARD_SERVICE_HOST"] == "0.0.0.0"
    health = instruction(runtime, "HEALTHCHECK")[0]
    health_cmd = json.loads(health[health.index("CMD") + 3:].strip())
    health_cmd[0] = sys.executable if health_cmd[0] == "python" else health_cmd[0]
    exe = shutil.which(entry[0])
    assert exe, "the image's entrypoint command is installed by the package"
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen([exe, *entry[1:]], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        ok = False
        for _ in range(600):
            if subprocess.run(health_cmd, env=env, capture_output=True).returncode == 0:
                ok = True
                break
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            time.sleep(0.2)
        assert ok, "health check never passed"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
    # After shutdown the health check fails: it really probes the server.
    assert subprocess.run(health_cmd, env=env, capture_output=True).returncode != 0


def test_graceful_shutdown_finishes_in_flight_work(tmp_path: Path) -> None:
    with run_server(tmp_path, {"REWARD_SERVICE_WORKERS": "1"}) as live:
        outcome: dict[str, object] = {}

        def slow_call() -> None:
            with live.client() as c:
                r = c.post("/v1/verify", json={"items": [
                    {"verifier": "test_sleep", "response": "x", "options": {"seconds": 2.0}}]})
                outcome["status"] = r.status_code
                outcome["body"] = r.json()

        t = threading.Thread(target=slow_call)
        t.start()
        time.sleep(0.7)  # the request is in flight
        live.proc.send_signal(signal.SIGTERM)
        t.join(timeout=30)
        assert outcome.get("status") == 200, outcome
        assert outcome["body"]["results"][0]["status"] == "ok"
        # uvicorn re-raises SIGTERM after its graceful shutdown, so the exit is 0 or "killed by SIGTERM".
        assert live.proc.wait(timeout=30) in (0, -signal.SIGTERM)
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{live.url}/healthz", timeout=2)


def test_logs_are_json_with_request_ids(tmp_path: Path) -> None:
    with run_server(tmp_path, {"REWARD_SERVICE_WORKERS": "1"}) as live:
        with live.client() as c:
            c.post("/v1/verify", json={"items": [{"verifier": "exact_match", "response": "a", "reference": "a"}]},
                   headers={"X-Request-ID": "trace-42"})
        time.sleep(0.3)
        lines = [json.loads(line) for line in live.log().splitlines() if line.startswith("{")]
    access = [e for e in lines if e.get("route") == "/v1/verify"]
    assert access and access[-1]["request_id"] == "trace-42"
    assert access[-1]["status_code"] == 200 and "duration_ms" in access[-1]
    assert all({"ts", "level", "logger", "msg"} <= set(e) for e in lines)


def test_alert_rules_use_metrics_the_service_exports(server) -> None:
    rules = yaml.safe_load((ROOT / "deploy" / "alerts.yml").read_text())
    exprs = " ".join(r["expr"] for g in rules["groups"] for r in g["rules"])
    used = set(re.findall(r"\b(reward_[a-z_]+)", exprs))
    with server.client() as c:
        c.post("/v1/verify", json={"items": [{"verifier": "exact_match", "response": "a", "reference": "a"}]})
        exported = c.get("/metrics").text
    missing = [m for m in used if m not in exported]
    assert used and not missing, missing
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    assert prom["scrape_configs"][0]["metrics_path"] == "/metrics"
