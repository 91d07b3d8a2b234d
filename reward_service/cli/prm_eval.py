"""``reward-service prm-eval``: the ProcessBench metric for a configured PRM, computed in-process."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from reward_service.settings import load_settings
from verifiers.kinds.reward_models.aggregate import first_error
from verifiers.kinds.reward_models.hub import MODELS
from verifiers.kinds.reward_models.processbench import SUBSETS, load_subset, processbench_metric

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "prm"


async def evaluate(hub: Any, model: str, data_dir: Path, subsets: list[str], threshold: float,
                   limit: int | None) -> list[dict[str, Any]]:
    """Score every sample through the hub's batcher (all submitted at once) and compute the metric per subset."""
    rows = []
    for subset in subsets:
        samples = load_subset(data_dir, subset, limit)
        started = time.perf_counter()
        scored = await hub.score_steps(model, [(s["problem"], list(s["steps"])) for s in samples])
        labels, preds, failed = [], [], 0
        for sample, result in zip(samples, scored):
            if isinstance(result, BaseException):
                failed += 1  # not scored: left out of the metric, reported
                continue
            labels.append(int(sample["label"]))
            fe = first_error(result, threshold)
            preds.append(-1 if fe is None else fe)
        metric = processbench_metric(subset, labels, preds).to_dict()
        metric.update(failed=failed, seconds=round(time.perf_counter() - started, 2))
        rows.append(metric)
    return rows


def prm_eval(
    model: str = typer.Option(..., "--model", "-m", help="Name of a configured PRM."),
    data_dir: Annotated[Path, typer.Option("--data-dir", help="Directory holding processbench_*.json.")] = DEFAULT_DATA,
    subsets: str = typer.Option(",".join(SUBSETS), "--subsets", help="Comma-separated subsets."),
    threshold: float = typer.Option(0.5, "--threshold", help="A step scored below it is the predicted error."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N samples of each subset."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    config: str | None = typer.Option(None, "--config", help="YAML or TOML settings file."),
) -> None:
    """ProcessBench: per subset, accuracy on erroneous and on correct samples and their harmonic mean (F1)."""
    from reward_service.resources.runtime import Runtime

    wanted = [s.strip() for s in subsets.split(",") if s.strip()]
    unknown = [s for s in wanted if not (data_dir / f"processbench_{s}.json").is_file()]
    if unknown:
        raise typer.BadParameter(f"no data for {unknown} in {data_dir}", param_hint="--subsets")
    settings = load_settings(config, workers=1)
    if model not in [m.name for m in settings.models.specs]:
        raise typer.BadParameter(
            f"{model!r} is not configured; configured: {[m.name for m in settings.models.specs]}", param_hint="--model"
        )

    async def run() -> list[dict[str, Any]]:
        async with Runtime.open(settings) as runtime:
            hub = runtime.resources.get(MODELS)
            assert hub is not None, "the runtime opens the reward models"
            await hub.wait_ready()
            return await evaluate(hub, model, data_dir, wanted, threshold, limit)

    rows = asyncio.run(run())
    if as_json:
        typer.echo(json.dumps({"model": model, "threshold": threshold, "subsets": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ProcessBench: {model} (threshold {threshold})")
    for col in ("subset", "erroneous acc", "correct acc", "F1", "n err", "n cor", "failed", "s"):
        table.add_column(col)

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    for r in rows:
        table.add_row(r["subset"], pct(r["error_acc"]), pct(r["correct_acc"]), pct(r["f1"]), str(r["n_error"]),
                      str(r["n_correct"]), str(r["failed"]), str(r["seconds"]))
    f1s = [r["f1"] for r in rows if r["f1"] is not None]
    if f1s:
        table.add_row("average", "", "", pct(sum(f1s) / len(f1s)), "", "", "", "")
    Console().print(table)
