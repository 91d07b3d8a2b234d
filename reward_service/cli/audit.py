"""``reward-service audit labelled|probes``: run an audit in-process (same engine as the server) and write
``report.json`` and ``report.html`` into a directory; ``audit diff`` compares two verifiers on unlabelled rollouts
(``reward_service.cli.audit_diff``)."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from reward_service.cli.help import WholeSummaries
from reward_service.settings import load_settings

# plain help, as the main app (cli/main.py), with each command's summary whole
audit_app = typer.Typer(no_args_is_help=True, cls=WholeSummaries, rich_markup_mode=None,
                        help="False-positive audits of a verifier (labelled data or probes), and diffs of two "
                        "verifiers.")


def _run(kind: str, verifier: str, input_path: Path, out: Path, options: str, config: str | None,
         workers: int, db: str | None, **kwargs: Any) -> None:
    from reward_service.resources.calibration import policy_from_settings
    from reward_service.resources.runtime import Runtime
    from verifiers.audit import AuditInputError, labelled_audit, probe_audit, write_report
    from verifiers.audit.rows import read_jsonl

    settings = load_settings(config, workers=workers, calibration_db=db)
    try:
        rows = read_jsonl(input_path)
        opts = json.loads(options)
    except (AuditInputError, OSError, json.JSONDecodeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    async def run() -> dict[str, Any]:
        async with Runtime.open(settings) as runtime:
            if kind == "labelled":
                store = policy_from_settings(settings).store if kwargs.pop("store") else None
                source = kwargs.pop("source") or f"labelled:{input_path.name}"
                return await labelled_audit(runtime.engine, verifier, rows, opts, store=store, source=source)
            return await probe_audit(runtime.engine, verifier, rows, opts, **kwargs)

    try:
        report = asyncio.run(run())
    except AuditInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    json_path, html_path = write_report(report, out)
    if kind == "labelled":
        c = report["confusion"]
        typer.echo(f"{verifier}: TP {c['tp']} FP {c['fp']} TN {c['tn']} FN {c['fn']}; "
                   f"FP rate {report['rho0']['value']}, FN rate {report['rho1']['value']}"
                   + (f"; stored in {settings.calibration.db}" if report["stored"] else ""))
    else:
        for family, s in report["families"].items():
            typer.echo(f"{family:>18}: FP {s['fp']}/{s['n']}")
    typer.echo(f"wrote {json_path} and {html_path}")


_VERIFIER = typer.Option(..., "--verifier", "-v", help="Verifier name.")
_INPUT = typer.Option(..., "--input", "-i", exists=True, dir_okay=False, help="JSONL input file.")
_OUT = typer.Option(..., "--out", "-o", file_okay=False, help="Directory for report.json and report.html.")
_OPTIONS = typer.Option("{}", "--options", help="Verifier options as JSON (the configuration audited).")
_CONFIG = typer.Option(None, "--config", help="YAML or TOML settings file.")
_WORKERS = typer.Option(0, "--workers", help="Worker processes (0: one per core).")


@audit_app.command("labelled")
def labelled(
    verifier: str = _VERIFIER, input: Path = _INPUT, out: Path = _OUT, options: str = _OPTIONS,
    store: bool = typer.Option(False, "--store", help="Write the FP/FN counts to the calibration store."),
    source: str | None = typer.Option(None, "--source", help="Name of these counts in the store "
                                         "(default: labelled:<input file name>); re-running replaces them."),
    db: str | None = typer.Option(None, "--db", help="Calibration SQLite file (default: the calibration_db setting)."),
    config: str | None = _CONFIG, workers: int = _WORKERS,
) -> None:
    """Rows {"response", "reference", "label"}: confusion matrix, FP/FN rates with intervals, every disagreement."""
    _run("labelled", verifier, input, out, options, config, workers, db, store=store, source=source)


@audit_app.command("probes")
def probes(
    verifier: str = _VERIFIER, input: Path = _INPUT, out: Path = _OUT, options: str = _OPTIONS,
    families: str | None = typer.Option(None, "--families", help="Comma-separated families (default: all that "
                                           "fit the verifier)."),
    per_family: int | None = typer.Option(None, "--per-family", min=1, help="Sample this many variants per "
                                             "family and reference."),
    seed: int = typer.Option(0, "--seed", help="Seed of the variants' sampling (--per-family)."),
    config: str | None = _CONFIG, workers: int = _WORKERS,
) -> None:
    """Rows {"reference"}: generate attacks per family and report each family's false-positive rate."""
    chosen = [f.strip() for f in families.split(",") if f.strip()] if families else None
    _run("probes", verifier, input, out, options, config, workers, None, families=chosen, per_family=per_family,
         seed=seed)


_DIFF_OUT = typer.Option(..., "--out", "-o", file_okay=False,
                         help="Directory for disagreements.jsonl, report.html and summary.json.")


@audit_app.command("diff")
def diff(
    rollouts: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Rollouts (.jsonl or .parquet) in "
                                             "the batch scorer's format; no labels needed.")],
    verifier: str = _VERIFIER,
    against: str = typer.Option(..., "--against", "-a", help="The verifier to compare with."),
    out: Path = _DIFF_OUT,
    options: str = typer.Option("{}", "--options", help="Options of --verifier as JSON."),
    against_options: str = typer.Option("{}", "--against-options", help="Options of --against as JSON."),
    response_field: str = typer.Option("response", help="Field holding the model output."),
    reference_field: str = typer.Option("reference", help="Field holding the reference."),
    id_field: str = typer.Option("id", help="Field holding the row id shown in the report (a row without it: its "
                                 "position)."),
    chunk_size: int = typer.Option(256, min=1, help="Rows per chunk."),
    concurrency: int = typer.Option(4, min=1, help="Chunks in flight at once."),
    tail_chars: int = typer.Option(2000, min=1, help="Characters of each response's end kept in the outputs."),
    max_cards: int = typer.Option(1000, min=0, help="Disagreements shown in report.html (all go to the JSONL)."),
    config: str | None = _CONFIG, workers: int = _WORKERS,
) -> None:
    """Run two verifiers over the same rollouts: agreement, counts per verdict pair, and every disagreement."""
    from reward_service.cli.audit_diff import DiffJob, parse_options, run

    job = DiffJob(rollouts, out, (verifier, against),
                  (parse_options(options, "--options"), parse_options(against_options, "--against-options")),
                  response_field, reference_field, id_field, chunk_size, concurrency, tail_chars, max_cards)
    run(job, config, workers)
