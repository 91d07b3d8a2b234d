"""``reward-service serve-ray``: the service as Ray Serve replicas, from one command."""
from __future__ import annotations

import os

import typer

from reward_service.settings import ENV_PREFIX, load_settings


def serve_ray(
    replicas: int = typer.Option(2, min=1, help="Replicas, each with its own worker pool and sandbox."),
    cpus_per_replica: float = typer.Option(
        1.0, min=0, help="CPUs Ray reserves per replica; its worker pool and sandbox slots follow (workers=0)."),
    max_ongoing_requests: int = typer.Option(64, min=1, help="Requests a replica takes at once before Serve's "
                                             "proxy queues more (each replica's admission budget still applies)."),
    address: str | None = typer.Option(
        None, help="Ray cluster to join ('auto': the one on this node); default: start a local Ray."),
    host: str | None = typer.Option(None, help="Serve's HTTP proxy bind address (default: the 'host' setting)."),
    port: int | None = typer.Option(None, help="Serve's HTTP proxy port (default: the 'port' setting)."),
    config: str | None = typer.Option(None, "--config", help="YAML or TOML settings file (read on every node)."),
) -> None:
    """Run the HTTP service as Ray Serve replicas behind Serve's HTTP proxy, until interrupted.

    The replicas get this shell's REWARD_SERVICE_* variables (through Ray's runtime environment, which Ray's
    dashboard shows: give secrets such as the auth token through the settings file instead)."""
    try:
        import ray
        from ray import serve

        from reward_service.deploy.ray_serve import application
    except ImportError as exc:
        raise typer.BadParameter(f"Ray Serve is not installed ({exc}): pip install 'reward-service[serve]'") from None

    settings = load_settings(config, host=host, port=port)
    config_path = os.path.abspath(config) if config else None
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    ray.init(address=address, include_dashboard=False, ignore_reinit_error=True)
    serve.start(http_options={"host": settings.server.host, "port": settings.server.port})
    target = application(replicas=replicas, cpus_per_replica=cpus_per_replica,
                         max_ongoing_requests=max_ongoing_requests, config=config_path, env=env)
    try:
        serve.run(target, name="reward-service", route_prefix="/", blocking=True)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()
