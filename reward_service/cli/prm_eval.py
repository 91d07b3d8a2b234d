"""``reward-service prm-eval``: the ProcessBench metric for a configured PRM, or for the generative PRM through a
configured judge backend, computed in-process."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from reward_service.settings import load_settings
from verifiers.kinds.judges.backends import OpenAIChatBackend
from verifiers.kinds.judges.registry import JUDGES
from verifiers.kinds.reward_models.aggregate import first_error
from verifiers.kinds.reward_models.hub import MODELS
from verifiers.kinds.reward_models.processbench import SUBSETS, load_subset, processbench_metric
from verifiers.types import Status, VerifyItem

# Step scores of (problem, steps) pairs, in order; an exception stands for a sample that could not be scored.
Scorer = Callable[[list[tuple[str, list[str]]]], Awaitable[Sequence[Sequence[float] | BaseException]]]

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "prm"


async def evaluate(hub: Any, model: str, data_dir: Path, subsets: list[str], threshold: float,
                   limit: int | None, sample: int | None = None) -> list[dict[str, Any]]:
    """Score every sample through the hub's batcher (all submitted at once) and compute the metric per subset."""
    async def score(pairs: list[tuple[str, list[str]]]) -> Sequence[Sequence[float] | BaseException]:
        result: Sequence[Sequence[float] | BaseException] = await hub.score_steps(model, pairs)
        return result

    return await evaluate_scorer(score, data_dir, subsets, threshold, limit, sample)


def generative_scorer(engine: Any, backend: str | None, options: dict[str, Any],
                      requests_per_minute: int | None = None) -> Scorer:
    """Step scores from the ``generative_prm`` verifier through the engine (its cache, rate gate and deadlines); a
    verdict other than ok (an unreadable critique, an unavailable judge) is a sample that could not be scored.

    Under a rate limit the samples go in chunks of about two minutes of calls, so none waits at the gate past its
    deadline (a whole subset at once against 60 RPM would time most of them out)."""
    calls_per_step = int(options.get("samples", 1))
    per_step = options.get("mode") == "per_step"

    async def score(pairs: list[tuple[str, list[str]]]) -> list[Sequence[float] | BaseException]:
        out: list[Sequence[float] | BaseException] = []
        costs = [calls_per_step * (len(steps) if per_step else 1) for _, steps in pairs]
        for start, end in call_chunks(costs, None if requests_per_minute is None else 2 * requests_per_minute):
            items = [VerifyItem("generative_prm", "", problem, {**options, "backend": backend, "steps": steps})
                     for problem, steps in pairs[start:end]]
            for verdict in await engine.verify_many(items):
                if verdict.status == Status.OK:
                    out.append(verdict.details["step_scores"])
                else:
                    out.append(RuntimeError(f"{verdict.status.value}: {verdict.reason}"))
        return out

    return score


def call_chunks(costs: Sequence[int], budget: int | None) -> list[tuple[int, int]]:
    """Consecutive (start, end) ranges whose costs (judge calls) sum to at most ``budget`` (a range holds at least one
    item, whatever it costs); one range for everything when there is no budget."""
    if budget is None or not costs:
        return [(0, len(costs))] if costs else []
    ranges, start, total = [], 0, 0
    for i, cost in enumerate(costs):
        if i > start and total + cost > budget:
            ranges.append((start, i))
            start, total = i, 0
        total += cost
    ranges.append((start, len(costs)))
    return ranges


def spread(samples: list[dict[str, Any]], n: int | None) -> list[dict[str, Any]]:
    """``n`` samples evenly spaced over the subset: the files list erroneous samples before correct ones, so the
    first ``n`` alone would leave one side of the metric empty."""
    if n is None or n >= len(samples):
        return samples
    return [samples[i * len(samples) // n] for i in range(n)]


async def evaluate_scorer(score: Scorer, data_dir: Path, subsets: list[str], threshold: float,
                          limit: int | None, spread_over: int | None = None) -> list[dict[str, Any]]:
    """The metric per subset from the step scores ``score`` gives for every sample (all submitted at once)."""
    rows = []
    for subset in subsets:
        samples = spread(load_subset(data_dir, subset, limit), spread_over)
        started = time.perf_counter()
        scored = await score([(s["problem"], list(s["steps"])) for s in samples])
        labels, preds, failed, reasons = [], [], 0, []
        for sample, result in zip(samples, scored):
            if isinstance(result, BaseException):
                failed += 1  # not scored: left out of the metric, reported
                reasons.append(str(result)[:200])
                continue
            labels.append(int(sample["label"]))
            fe = first_error(result, threshold)
            preds.append(-1 if fe is None else fe)
        metric = processbench_metric(subset, labels, preds).to_dict()
        metric.update(failed=failed, seconds=round(time.perf_counter() - started, 2))
        if reasons:
            metric["failures"] = reasons[:5]
        rows.append(metric)
    return rows


def prm_eval(
    model: str | None = typer.Option(None, "--model", "-m", help="Name of a configured PRM."),
    judge: str | None = typer.Option(
        None, "--judge", help="Score with the generative PRM through this configured judge backend instead."),
    judge_options: str = typer.Option(
        "{}", "--judge-options", help='generative_prm options as JSON, e.g. \'{"mode": "per_step", "samples": 3}\'.'),
    data_dir: Annotated[Path, typer.Option("--data-dir", help="Directory holding processbench_*.json.")] = DEFAULT_DATA,
    subsets: str = typer.Option(",".join(SUBSETS), "--subsets", help="Comma-separated subsets."),
    threshold: float = typer.Option(0.5, "--threshold", help="A step scored below it is the predicted error."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N samples of each subset."),
    sample: int | None = typer.Option(
        None, "--sample", min=1, help="N samples spread evenly over each subset (both erroneous and correct ones)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    config: str | None = typer.Option(None, "--config", help="YAML or TOML settings file."),
) -> None:
    """ProcessBench: per subset, accuracy on erroneous and on correct samples and their harmonic mean (F1)."""
    from reward_service.resources.judges import judge_configs
    from reward_service.resources.runtime import Runtime

    if (model is None) == (judge is None):
        raise typer.BadParameter("name either a PRM (--model) or a judge backend (--judge)", param_hint="--model")
    wanted = [s.strip() for s in subsets.split(",") if s.strip()]
    unknown = [s for s in wanted if not (data_dir / f"processbench_{s}.json").is_file()]
    if unknown:
        raise typer.BadParameter(f"no data for {unknown} in {data_dir}", param_hint="--subsets")
    settings = load_settings(config, workers=1)
    options = _judge_options(judge_options)
    if model is not None and model not in [m.name for m in settings.models.specs]:
        raise typer.BadParameter(
            f"{model!r} is not configured; configured: {[m.name for m in settings.models.specs]}", param_hint="--model"
        )
    if judge is not None and judge not in (configured := judge_configs(settings)):
        raise typer.BadParameter(f"judge backend {judge!r} is not configured; configured: {sorted(configured)}",
                                 param_hint="--judge")
    name = model if model is not None else f"generative_prm via {judge}"

    async def run() -> list[dict[str, Any]]:
        async with Runtime.open(settings) as runtime:
            if model is not None:
                hub = runtime.resources.get(MODELS)
                assert hub is not None, "the runtime opens the reward models"
                await hub.wait_ready()
                return await evaluate(hub, model, data_dir, wanted, threshold, limit, sample)
            judges = runtime.resources.get(JUDGES)
            assert judges is not None and judge is not None, "the runtime opens the judges"
            backend = judges.get(judge)  # a local model has no rate to respect
            rpm = backend.limiter.limits.requests_per_minute if isinstance(backend, OpenAIChatBackend) else None
            score = generative_scorer(runtime.engine, judge, {**options, "threshold": threshold}, rpm)
            return await evaluate_scorer(score, data_dir, wanted, threshold, limit, sample)

    rows = asyncio.run(run())
    if as_json:
        typer.echo(json.dumps({"model": name, "threshold": threshold, "subsets": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ProcessBench: {name} (threshold {threshold})")
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


def _judge_options(text: str) -> dict[str, Any]:
    """--judge-options, checked against the verifier's options now rather than failing every sample."""
    from pydantic import ValidationError

    from verifiers.kinds.judges.generative_prm import GenerativePrmOptions

    try:
        options = json.loads(text)
        if not isinstance(options, dict):
            raise ValueError("not a JSON object")
        GenerativePrmOptions.model_validate(options)
    except (ValueError, ValidationError) as exc:
        raise typer.BadParameter(str(exc)[:300], param_hint="--judge-options") from None
    return options
