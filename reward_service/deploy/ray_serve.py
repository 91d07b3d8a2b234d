"""The service as Ray Serve replicas.

Each replica runs the whole FastAPI app with its own lifespan, so its own verifier worker pool, sandbox warm pool and
backends; Serve's HTTP proxy spreads requests over the replicas. A replica sizes its worker pool and sandbox slots to
the CPUs Ray gave it (``ray_actor_options.num_cpus``), not to the node's cores, which every replica on the node would
otherwise claim. Every answer names its replica in ``X-Reward-Replica``.

Entry points: ``reward-service serve-ray`` (starts or joins Ray, deploys, serves until interrupted), and Serve's own
``serve run deploy/ray-serve.yaml`` / ``serve deploy`` through the application builder ``build_app``.
See docs/operations.md (Ray Serve).
"""
from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI
from ray import serve
from ray.serve import Application, Deployment
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service.settings import FLAT_NAMES, Settings, load_settings

REPLICA_HEADER = "x-reward-replica"
DEPLOYMENT_NAME = "RewardService"
# Requests a replica takes at once before the proxy queues the next for another replica. A request is a batch, and
# the replica's own admission budget (max_pending_items, 429 beyond it) bounds the work, so this is set well above
# Serve's default of 5, which would queue a trainer's parallel chunks at the proxy while the replica's cores idle.
MAX_ONGOING_REQUESTS = 64


def replica_settings(config: str | None, settings: dict[str, Any], cpus: float) -> Settings:
    """One replica's settings: the file, the environment, ``settings`` (flat names), then, where those leave them at
    0 (one per core), the worker pool at one process per CPU Ray gave the replica and the sandbox at two slots per
    CPU, as a service alone on a machine of that many cores would have."""
    chosen = load_settings(config, **settings)
    cores = max(1, math.floor(cpus))
    sized: dict[str, Any] = {}
    if chosen.execution.workers == 0:
        sized["workers"] = cores
    if chosen.sandbox.max_concurrent == 0:
        sized["sandbox_max_concurrent"] = 2 * cores
    return load_settings(config, **{**settings, **sized}) if sized else chosen


class ReplicaHeader:
    """Names the replica in every HTTP answer (which replica scored a request, when reading a client's log).

    It also drops the app's ``X-Request-ID``: Serve's proxy puts its request id (the client's, or one it makes) on
    the request, which the app takes up, and adds it to the answer itself, which would otherwise carry it twice."""

    def __init__(self, app: ASGIApp, replica: str) -> None:
        self.app = app
        self.value = replica.encode("latin-1", "replace")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                message["headers"] = [*kept, (REPLICA_HEADER.encode(), self.value)]
            await send(message)

        await self.app(scope, receive, send_named)


class RewardServiceReplica:
    """One replica. The app is built in the replica (``__serve_build_asgi_app__``), never pickled from the driver,
    and Serve runs its lifespan there: the runtime opens when the replica starts and closes when it stops."""

    def __init__(self, config: str | None = None, settings: dict[str, Any] | None = None) -> None:
        import ray

        from reward_service.logs import configure_logging

        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
        self.settings = replica_settings(config, dict(settings or {}), cpus)
        self.replica = serve.get_replica_context().replica_id.unique_id
        configure_logging(self.settings.server.log_level, self.settings.server.log_json)
        self.service_app: FastAPI | None = None

    def __serve_build_asgi_app__(self) -> FastAPI:
        from reward_service.app import create_app

        app = create_app(self.settings)
        app.add_middleware(ReplicaHeader, replica=self.replica)
        self.service_app = app
        return app

    def check_health(self) -> None:
        """Serve restarts a replica whose check raises: one whose worker pool has no live process left."""
        app = self.service_app
        runtime = app.state.services.runtime if app is not None else None
        if runtime is not None and runtime.pool.stats.alive == 0:
            raise RuntimeError("no live verifier worker in this replica")


# Serve's defaults for the deployment; ``application`` and a Serve config's ``deployments`` override them.
RewardService: Deployment = serve.deployment(
    name=DEPLOYMENT_NAME, max_ongoing_requests=MAX_ONGOING_REQUESTS, ray_actor_options={"num_cpus": 1},
)(serve.ingress()(RewardServiceReplica))


def build_app(args: dict[str, Any]) -> Application:
    """Application builder for ``serve run`` / ``serve deploy`` (import path
    ``reward_service.deploy.ray_serve:build_app``). ``args``: ``config``, a settings file present on every node, and
    ``settings``, flat setting names. Replicas, CPUs and ongoing requests come from the config's ``deployments``."""
    unknown = set(args) - {"config", "settings"}
    if unknown:
        raise ValueError(f"unknown application args {sorted(unknown)}: expected 'config' and 'settings'")
    settings = dict(args.get("settings") or {})
    misnamed = sorted(set(settings) - set(FLAT_NAMES))
    if misnamed:  # refused here, not as replicas failing to start on every node
        raise ValueError(f"unknown settings {misnamed} in the application's args")
    return RewardService.bind(config=args.get("config"), settings=settings)


def application(*, replicas: int, cpus_per_replica: float, max_ongoing_requests: int = MAX_ONGOING_REQUESTS,
                config: str | None = None, settings: dict[str, Any] | None = None,
                env: dict[str, str] | None = None) -> Application:
    """The deployment bound with its sizing, for ``serve.run``; ``env``: environment variables of every replica
    (``REWARD_SERVICE_*`` settings), set through Ray's runtime environment."""
    actor_options: dict[str, Any] = {"num_cpus": cpus_per_replica}
    if env:
        actor_options["runtime_env"] = {"env_vars": dict(env)}
    return RewardService.options(
        num_replicas=replicas,
        max_ongoing_requests=max_ongoing_requests,
        ray_actor_options=actor_options,
    ).bind(config=config, settings=dict(settings or {}))
