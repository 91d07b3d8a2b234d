"""Several instances in containers: docker-compose.yml scaled to N replicas, and deploy/kubernetes.yaml parsed and
checked against the Kubernetes API's own field names, the app's routes, its settings and the sandbox's needs."""
from __future__ import annotations

import os
import re
import subprocess
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from reward_service.app import create_app
from reward_service.settings import ENV_PREFIX, FLAT_NAMES, Settings, load_settings
from tests.support.deploy import compose_cli
from tests.support.server import ROOT

MANIFEST = ROOT / "deploy" / "kubernetes.yaml"
KIND_MODELS = {"Deployment": "V1Deployment", "Service": "V1Service", "PodDisruptionBudget": "V1PodDisruptionBudget"}
SCALARS = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}


def documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def deployment() -> dict[str, Any]:
    [dep] = [d for d in documents() if d["kind"] == "Deployment"]
    return dep


def container() -> dict[str, Any]:
    [c] = deployment()["spec"]["template"]["spec"]["containers"]
    return c


def literal_env(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c["env"] if "value" in e}


def unknown_fields(value: Any, type_name: str, path: str) -> list[str]:
    """Where ``value`` does not fit the Kubernetes Python client's model ``type_name`` (the API's field names and
    JSON types, from the API's OpenAPI schema): a misspelt or misplaced field is silently dropped by the API server."""
    from kubernetes.client import models

    if type_name.startswith("list["):
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [p for i, v in enumerate(value) for p in unknown_fields(v, type_name[5:-1], f"{path}[{i}]")]
    if type_name.startswith("dict("):
        inner = type_name[type_name.index(",") + 1:-1].strip()
        if not isinstance(value, dict):
            return [f"{path}: expected a mapping"]
        return [p for k, v in value.items() for p in unknown_fields(v, inner, f"{path}.{k}")]
    if type_name in SCALARS:
        ok = isinstance(value, SCALARS[type_name]) and not (type_name == "int" and isinstance(value, bool))
        return [] if ok else [f"{path}: {value!r} is not {type_name}"]
    model = getattr(models, type_name)
    if not isinstance(value, dict):
        return [f"{path}: expected a {type_name} mapping"]
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    problems = []
    for key, sub in value.items():
        if key not in by_json:
            problems.append(f"{path}.{key}: no such field in {type_name}")
        else:
            problems += unknown_fields(sub, model.openapi_types[by_json[key]], f"{path}.{key}")
    return problems


def test_manifest_fields_are_kubernetes_fields() -> None:
    pytest.importorskip("kubernetes", reason="the kubernetes client (test extra) holds the API's field names")
    docs = documents()
    assert {d["kind"] for d in docs} == set(KIND_MODELS)
    for doc in docs:
        assert unknown_fields(doc, KIND_MODELS[doc["kind"]], doc["kind"]) == []
    # the check itself notices a misspelt field
    dep = deployment()
    dep["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    assert unknown_fields(dep, "V1Deployment", "Deployment") == [
        "Deployment.spec.template.spec.containers[0].readinesProbe: no such field in V1Container"]


def test_probes_are_routes_of_the_app_on_its_port() -> None:
    """Each probe's path asked of the real app (its lifespan run): answered, not 404."""
    c = container()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    port = int(literal_env(c)[f"{ENV_PREFIX}PORT"])
    assert ports == {"http": port} and port == Settings().server.port
    probes = {name: c[name]["httpGet"] for name in ("startupProbe", "readinessProbe", "livenessProbe")}
    meta = deployment()["spec"]["template"]["metadata"]
    with TestClient(create_app(load_settings(workers=1, sandbox_warm_pool=0))) as client:
        for name, probe in probes.items():
            assert probe["port"] in ports or probe["port"] == port
            r = client.get(probe["path"])
            assert r.status_code == 200, f"{name} probes {probe['path']}: {r.status_code} {r.text[:200]}"
        assert "reward_requests_total" in client.get(meta["annotations"]["prometheus.io/path"]).text
    assert probes["readinessProbe"]["path"] == "/readyz"  # 503 while starting or draining: out of the Service
    assert probes["livenessProbe"]["path"] == "/healthz"  # not /readyz: a draining pod must not be restarted
    for doc in documents():
        if doc["kind"] == "Service":
            assert [p["targetPort"] for p in doc["spec"]["ports"]] == ["http"]
            assert doc["spec"]["selector"] == deployment()["spec"]["selector"]["matchLabels"]
    assert int(meta["annotations"]["prometheus.io/port"]) == port


def test_manifest_settings_are_real_and_sized_to_the_cpu_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    c = container()
    for e in c["env"]:
        assert e["name"].startswith(ENV_PREFIX) and e["name"][len(ENV_PREFIX):].lower() in FLAT_NAMES, e["name"]
    for name in [k for k in os.environ if k.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    for name, value in literal_env(c).items():
        monkeypatch.setenv(name, value)
    settings = load_settings()  # the values parse as the service reads them
    cpus = int(c["resources"]["limits"]["cpu"])
    assert c["resources"]["requests"]["cpu"] == c["resources"]["limits"]["cpu"]
    # a container sees every core of its node, so the pools follow the CPU limit, never the core count (0)
    assert settings.execution.workers == cpus
    assert settings.sandbox.max_concurrent == 2 * cpus
    assert deployment()["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > settings.server.shutdown_grace_s


def test_manifest_gives_the_sandbox_what_it_needs_and_no_privilege() -> None:
    pod = deployment()["spec"]["template"]["spec"]
    c = container()
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    # bwrap mounts a fresh procfs in its own user namespace: the kernel refuses while /proc has masked paths, and
    # Kubernetes allows Unmasked only in a pod with its own user namespace
    assert sc["procMount"] == "Unmasked" and pod["hostUsers"] is False
    pod_sc = pod["securityContext"]
    assert pod_sc["seccompProfile"]["type"] in ("Unconfined", "Localhost")
    assert pod_sc["appArmorProfile"]["type"] in ("Unconfined", "Localhost")
    dockerfile_uid = re.search(r"useradd .*--uid (\d+)", (ROOT / "Dockerfile").read_text())
    assert dockerfile_uid and pod_sc["runAsUser"] == int(dockerfile_uid.group(1)) and pod_sc["runAsNonRoot"]
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    calibration = literal_env(c)[f"{ENV_PREFIX}CALIBRATION_DB"]
    assert "/tmp" in mounts and any(calibration.startswith(m + "/") for m in mounts)  # read-only root elsewhere


def compose_config(env: dict[str, str]) -> dict[str, Any]:
    cli = compose_cli()
    if cli is None:
        pytest.skip("no docker compose CLI on this host (scripts/setup.sh installs docker-compose)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REPLICA")}
    r = subprocess.run([*cli, "-f", str(ROOT / "docker-compose.yml"), "config"], capture_output=True, text=True,
                       cwd=ROOT, env={**clean, **env})
    assert r.returncode == 0, r.stderr
    return yaml.safe_load(r.stdout)["services"]["reward-service"]


def published(service: dict[str, Any]) -> list[str]:
    """Host ports, whichever form the compose CLI prints them in."""
    out = []
    for p in service["ports"]:
        out.append(str(p["published"]) if isinstance(p, dict) else p.split(":")[1])
    return out


def test_compose_scales_to_n_instances_sized_to_their_cpus() -> None:
    single = compose_config({})
    assert single["deploy"]["replicas"] == 1 and published(single) == ["8000"]
    assert single["environment"][f"{ENV_PREFIX}WORKERS"] == "0"  # uncapped: one worker per core, as before
    scaled = compose_config({"REPLICAS": "4", "REPLICA_CPUS": "2", "REPLICA_SANDBOX_SLOTS": "4",
                             "REPLICA_PORTS": "8000-8003"})
    assert scaled["deploy"]["replicas"] == 4
    assert float(scaled["deploy"]["resources"]["limits"]["cpus"]) == 2.0
    assert published(scaled) == ["8000-8003"]  # a host port per instance: the client's URL list
    env = scaled["environment"]
    assert (env[f"{ENV_PREFIX}WORKERS"], env[f"{ENV_PREFIX}SANDBOX_MAX_CONCURRENT"]) == ("2", "4")
    assert "container_name" not in scaled  # a fixed name would stop compose from starting a second instance
