"""The service as Ray Serve replicas on a local Ray instance: two replicas behind Serve's HTTP proxy, each with its
own lifespan (worker pool, sandbox), both answering; deleting the application closes every replica's runtime."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (the ray extra brings it)")

from reward_service.deploy.ray_serve import (
    DEPLOYMENT_NAME,
    REPLICA_HEADER,
    application,
    build_app,
    replica_settings,
)
from reward_service.settings import ENV_PREFIX, FLAT_NAMES, Settings
from tests.support.server import ROOT, free_port

CODE_REF = {"test_list": ["assert sq(2) == 4", "assert sq(3) == 9"]}
ITEMS = [
    {"id": "right", "verifier": "math", "response": r"so $\boxed{\frac{12}{36}}$", "reference": r"\frac{1}{3}"},
    {"id": "wrong", "verifier": "math", "response": r"\boxed{\frac{1}{2}}", "reference": r"\frac{1}{3}"},
    {"id": "none", "verifier": "math", "response": r"\boxed{}", "reference": "5"},
    {"id": "badref", "verifier": "math", "response": r"\boxed{5}", "reference": "}{"},
    {"id": "same", "verifier": "exact_match", "response": "Paris", "reference": "Paris"},
    {"id": "other", "verifier": "exact_match", "response": "Lyon", "reference": "Paris"},
]
CODE_ITEMS = [
    {"id": "passes", "verifier": "code", "response": "def sq(x):\n    return x * x\n", "reference": CODE_REF},
    {"id": "half", "verifier": "code", "response": "def sq(x):\n    return 4\n", "reference": CODE_REF},
]


def test_replica_sizes_its_pools_to_its_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REWARD_SERVICE_WORKERS", "REWARD_SERVICE_SANDBOX_MAX_CONCURRENT", "REWARD_SERVICE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    s = replica_settings(None, {}, 3.0)
    assert (s.execution.workers, s.sandbox.max_concurrent) == (3, 6)
    s = replica_settings(None, {}, 0.5)  # a fractional CPU still gets one worker
    assert (s.execution.workers, s.sandbox.max_concurrent) == (1, 2)
    s = replica_settings(None, {"workers": 5, "max_batch_items": 7}, 2.0)  # what the operator set stays
    assert (s.execution.workers, s.sandbox.max_concurrent, s.limits.max_batch_items) == (5, 4, 7)
    s = replica_settings(None, {"workers": 0}, 2.0)  # 0 said outright is still "one per core": the replica's
    assert s.execution.workers == 2
    monkeypatch.setenv("REWARD_SERVICE_SANDBOX_MAX_CONCURRENT", "9")
    assert replica_settings(None, {}, 2.0).sandbox.max_concurrent == 9


def test_builder_refuses_unknown_args() -> None:
    with pytest.raises(ValueError, match="replicas"):
        build_app({"replicas": 2})
    with pytest.raises(ValueError, match="max_batch_itemz"):
        build_app({"settings": {"max_batch_itemz": 2}})


def test_serve_config_file_is_valid_for_serve() -> None:
    """deploy/ray-serve.yaml as Serve reads it: its schema, its import path, its args, its deployment's name."""
    from ray.serve._private.utils import import_attr
    from ray.serve.schema import ServeDeploySchema

    raw = yaml.safe_load((ROOT / "deploy" / "ray-serve.yaml").read_text())
    schema = ServeDeploySchema.model_validate(raw) if hasattr(ServeDeploySchema, "model_validate") else \
        ServeDeploySchema.parse_obj(raw)
    [app] = schema.applications
    assert import_attr(app.import_path) is build_app
    build_app(app.args)  # the args are ones the builder takes, with real setting names
    [deployment] = app.deployments
    assert deployment.name == DEPLOYMENT_NAME
    assert deployment.ray_actor_options.num_cpus >= 1
    assert schema.http_options.port == Settings().server.port
    assert all(name[len(ENV_PREFIX):].lower() in FLAT_NAMES for name in app.runtime_env.get("env_vars", {}))


def test_serve_ray_command_serves_until_interrupted(tmp_path: Path) -> None:
    """The documented entry point: ``reward-service serve-ray`` starts a local Ray, deploys, answers through the
    proxy (with the shell's REWARD_SERVICE_* variables applied in the replica), and stops on Ctrl-C."""
    port = free_port()
    log = tmp_path / "serve-ray.log"
    env = {**os.environ, "REWARD_SERVICE_MAX_BATCH_ITEMS": "3", "RAY_DISABLE_IMPORT_WARNING": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reward_service", "serve-ray", "--replicas", "1", "--cpus-per-replica", "0",
             "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        item = {"verifier": "exact_match", "response": "a", "reference": "a"}
        ok = httpx.post(f"{url}/v1/verify", json={"items": [item] * 3}, timeout=60)
        assert ok.status_code == 200 and [x["score"] for x in ok.json()["results"]] == [1.0] * 3
        assert ok.headers[REPLICA_HEADER]
        too_many = httpx.post(f"{url}/v1/verify", json={"items": [item] * 4}, timeout=60)
        assert too_many.status_code == 413, too_many.text  # max_batch_items=3 from the shell reached the replica
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, log.read_text(errors="replace")[-3000:]


def _replica_tree(app_name: str) -> set[tuple[int, float]]:
    """(pid, start time) of the replica processes of ``app_name`` (Ray titles them ``ray::ServeReplica:<app>:...``)
    and of everything below them: worker pools, sandbox supervisors and sandboxes."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if f"ServeReplica:{app_name}:" not in " ".join(p.cmdline()):
                continue
            for q in [p, *p.children(recursive=True)]:
                out.add((q.pid, q.create_time()))
        except psutil.NoSuchProcess:
            pass
    return out


def _alive(procs: set[tuple[int, float]]) -> set[int]:
    alive = set()
    for pid, started in procs:
        try:
            p = psutil.Process(pid)
            if p.create_time() == started and p.status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture(scope="module")
def serve_url() -> Iterator[str]:
    import ray
    from ray import serve

    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        # workers left at 0: each replica sizes its pool to the one CPU Ray gives it
        serve.run(application(replicas=2, cpus_per_replica=1, settings={"sandbox_warm_pool": 1}),
                  name="reward-service", route_prefix="/")
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


def test_two_replicas_score_through_the_proxy(serve_url: str) -> None:
    with httpx.Client(base_url=serve_url, timeout=120) as client:
        deadline = time.monotonic() + 120
        while (ready := client.get("/readyz")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert ready.status_code == 200, ready.text
        # ready with the bwrap backend: the sandbox started in the replica (scripts/setup.sh installs bubblewrap)
        sandbox_works = ready.json().get("sandbox", {}).get("backend") == "bwrap"
        assert sandbox_works or shutil.which("bwrap") is None, ready.json()
        items = ITEMS + (CODE_ITEMS if sandbox_works else [])

        def post(i: int) -> httpx.Response:
            return client.post("/v1/verify", json={"items": items}, headers={"X-Request-ID": f"trainer-{i}"})

        with ThreadPoolExecutor(8) as threads:
            answers = list(threads.map(post, range(32)))
    replicas = set()
    for i, r in enumerate(answers):
        assert r.status_code == 200, r.text
        assert r.headers.get_list("x-request-id") == [f"trainer-{i}"]  # the caller's id, once
        replicas.add(r.headers[REPLICA_HEADER])
        results = {x["id"]: x for x in r.json()["results"]}
        assert [results[i]["score"] for i in ("right", "wrong", "same", "other")] == [1.0, 0.0, 1.0, 0.0]
        assert (results["none"]["status"], results["none"]["score"]) == ("no_answer", 0.0)
        assert (results["badref"]["status"], results["badref"]["score"]) == ("invalid_reference", None)
        if sandbox_works:
            assert [results[i]["score"] for i in ("passes", "half")] == [1.0, 0.5]
    assert len(replicas) == 2, replicas  # both replicas answered


def test_each_replica_has_its_own_runtime(serve_url: str) -> None:
    """Each replica's /metrics counts only what that replica scored: two runtimes, two registries."""
    seen: dict[str, float] = {}
    with httpx.Client(base_url=serve_url, timeout=60) as client:
        for _ in range(40):
            r = client.get("/metrics")
            assert r.status_code == 200
            total = sum(float(line.rsplit(" ", 1)[1]) for line in r.text.splitlines()
                        if line.startswith("reward_items_total{"))
            seen[r.headers[REPLICA_HEADER]] = total
            if len(seen) == 2:
                break
    assert len(seen) == 2 and all(v > 0 for v in seen.values()), seen


def test_deleting_the_application_closes_every_replica(serve_url: str) -> None:
    """A second application beside the first, deleted: no process of its replica (the replica itself, its worker
    pool, its sandboxes) is left behind, and the first application still answers."""
    from ray import serve

    serve.run(application(replicas=1, cpus_per_replica=0, settings={"workers": 2, "sandbox_warm_pool": 1}),
              name="short-lived", route_prefix="/short")
    assert httpx.get(f"{serve_url}/short/readyz", timeout=60).status_code == 200
    started = _replica_tree("short-lived")
    assert len(started) >= 3, started  # the replica and its two verifier workers at least
    serve.delete("short-lived")
    deadline = time.monotonic() + 60
    while _alive(started) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [psutil.Process(p).cmdline()[:3] for p in _alive(started)]
    assert not left, left
    assert httpx.get(f"{serve_url}/readyz", timeout=60).status_code == 200


def test_health_check_fails_when_the_pool_is_gone() -> None:
    """Serve replaces a replica whose ``check_health`` raises: the check passes on a running app and fails once its
    worker pool has no live process (here closed under it)."""
    from fastapi.testclient import TestClient

    from reward_service.app import create_app
    from reward_service.deploy.ray_serve import RewardServiceReplica
    from reward_service.settings import load_settings

    replica = object.__new__(RewardServiceReplica)  # the replica's own constructor needs a running Serve replica
    replica.service_app = None
    replica.check_health()  # not built yet: nothing to judge
    app = create_app(load_settings(workers=1, sandbox_warm_pool=0))
    replica.service_app = app
    with TestClient(app) as client:
        replica.check_health()
        client.portal.call(app.state.services.runtime.pool.close)
        with pytest.raises(RuntimeError, match="no live verifier worker"):
            replica.check_health()
