"""The ``reward-service`` command line: serve, and one-off checks from the shell."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import typer

from reward_service import __version__
from reward_service.cli.help import WholeSummaries, settings_epilog
from reward_service.settings import load_settings

# Plain help (click's layout, no rich panels): rich's option table cut long option names short at 80 columns and
# labelled flags <bool> as if they took a value.
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, cls=WholeSummaries,
                  help="Verifier and reward-model service for RL trainers.")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"reward-service {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Verifier and reward-model service for RL trainers."""


@app.command(epilog=settings_epilog())

@app.command()
def serve(
    host: str | None = typer.Option(None, help="Bind address (default 127.0.0.1)."),
    port: int | None = typer.Option(None, help="Port (default 8000)."),
    config: str | None = typer.Option(None, "--config", help="YAML or TOML settings file."),
) -> None:
    """Run the HTTP service."""
    import uvicorn

    from reward_service.app import create_app
    from reward_service.logs import configure_logging
    from reward_service.middleware import http_protocol

    settings = load_settings(config, host=host, port=port)
    configure_logging(settings.server.log_level, settings.server.log_json)
    app = create_app(settings)
    grace = settings.server.shutdown_grace_s

    class DrainingServer(uvicorn.Server):
        """On SIGTERM/SIGINT: stop accepting, drain the work in flight for ``shutdown_grace_s``, cancel what is left
        with named statuses (``Services.drain``), then uvicorn's own shutdown, whose backstop comes after ours."""

        async def shutdown(self, sockets: Any = None) -> None:
            for server in self.servers:
                server.close()
            await app.state.services.drain(grace)
            await super().shutdown(sockets)

    config_ = uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        log_config=None,
        timeout_graceful_shutdown=int(grace) + 15,  # a backstop: drain() has answered everything by then
        limit_concurrency=None,
        http=http_protocol(),
    )
    DrainingServer(config_).run()


def _parse_json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


@app.command()
def verify(
    verifier: str = typer.Option(..., "--verifier", "-v", help="Verifier name."),
    response: str = typer.Option(..., "--response", "-r", help="Model output to check."),
    reference: str = typer.Option("", "--reference", help="Reference: JSON if it parses, else plain text."),
    options: str = typer.Option("{}", "--options", help="Verifier options as JSON."),
    config: str | None = typer.Option(None, "--config", help="YAML or TOML settings file."),
) -> None:
    """Check one response in-process and print the verdict as JSON."""
    from pydantic import ValidationError

    from reward_service.resources.runtime import Runtime
    from verifiers.engine.registry import UnknownVerifier
    from verifiers.types import VerifyItem

    settings = load_settings(config, workers=1)
    item = VerifyItem(verifier=verifier, response=response, reference=_parse_json_or_text(reference))

    async def run() -> dict[str, Any]:
        async with Runtime.open(settings) as runtime:
            try:
                prepared = runtime.engine.prepare(item)
            except UnknownVerifier as exc:
                raise typer.BadParameter(str(exc), param_hint="--verifier") from None
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
                raise typer.BadParameter(problems, param_hint="--options") from None
            verdict = await runtime.engine.verify(prepared)
            return {"verifier": verifier, **verdict.to_dict()}

    try:
        parsed_options = json.loads(options)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--options") from None
    if not isinstance(parsed_options, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--options")
    item.options = parsed_options
    result = asyncio.run(run())
    typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
    raise typer.Exit(0 if result["status"] in ("ok", "no_answer", "rejected") else 1)


from reward_service.cli.prm_eval import prm_eval  # noqa: E402

app.command("prm-eval")(prm_eval)


from reward_service.cli.audit import audit_app  # noqa: E402

app.add_typer(audit_app, name="audit")


from reward_service.batch.command import score  # noqa: E402

app.command("score")(score)


from reward_service.deploy.command import serve_ray  # noqa: E402

app.command("serve-ray")(serve_ray)


def main() -> None:
    app()
