"""``reward-service audit diff``: two verifiers over one unlabelled rollout file, through the batch scorer's row
reading and in-process engine (the server's code path), then the rows where their rewards differ.

Both verifiers score each chunk at once, so the worker pool interleaves them; chunks commit in input order, so
``disagreements.jsonl`` follows the input and the first cards in the report are the first rows of the file.
"""
from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from reward_service.batch.command import RateColumn
from reward_service.batch.files import count_rows, file_format, read_rows
from reward_service.batch.rows import RESULT_FIELDS, AsyncVerifyBatch, RowSpec, ascore_batch, to_item, with_id
from reward_service.settings import Settings, load_settings
from verifiers.audit.diff import DiffTally, dump
from verifiers.audit.diff_report import render_diff_html
from verifiers.conversation import final_text

Chunk = list[tuple[int, dict[str, Any]]]


@dataclass(frozen=True)
class DiffJob:
    input: Path
    out: Path
    names: tuple[str, str]
    options: tuple[dict[str, Any], dict[str, Any]]
    response_field: str = "response"
    reference_field: str = "reference"
    id_field: str = "id"
    chunk_size: int = 256
    concurrency: int = 4
    tail_chars: int = 2000
    max_cards: int = 1000

    def spec(self, side: int) -> RowSpec:
        return RowSpec(self.response_field, self.reference_field, self.id_field, self.names[side],
                       options=self.options[side])


def parse_options(text: str, hint: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint=hint) from None
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint=hint)
    return value


def check_job(job: DiffJob, settings: Settings) -> tuple[str, str]:
    """Refuse unknown names and options that do not fit before any worker starts; the verifiers' versions."""
    from pydantic import ValidationError

    from verifiers.engine import Engine
    from verifiers.engine.registry import UnknownVerifier, build_registry
    from verifiers.kinds.spec import named_specs
    from verifiers.types import VerifyItem

    try:
        file_format(job.input)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="ROLLOUTS") from None
    registry = build_registry(settings.execution.extra_verifier_modules)
    for spec in named_specs(settings.composition.reward_specs):
        registry.register(spec)
    engine = Engine(registry)
    versions = []
    for name, options, hint in zip(job.names, job.options, ("--verifier", "--against")):
        try:
            versions.append(engine.prepare(VerifyItem(name, "", None, dict(options))).verifier.version)
        except UnknownVerifier as exc:
            raise typer.BadParameter(str(exc), param_hint=hint) from None
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            raise typer.BadParameter(f"options invalid for {name!r}: {problems}", param_hint=f"{hint} options") \
                from None
        except ValueError as exc:  # pydantic's ValidationError, or a verifier's own validate()
            raise typer.BadParameter(f"options invalid for {name!r}: {exc}", param_hint=f"{hint} options") from None
    return versions[0], versions[1]


def chunks(job: DiffJob) -> Iterator[Chunk]:
    spec = job.spec(0)
    chunk: Chunk = []
    for index, raw in enumerate(read_rows(job.input)):
        chunk.append((index, with_id(raw, index, spec)))
        if len(chunk) >= job.chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def run_diff(job: DiffJob, verify: AsyncVerifyBatch, tally: DiffTally,
                   on_progress: Callable[[int], None] = lambda n: None) -> list[dict[str, Any]]:
    """Score every row with both verifiers, count the pairs, write ``disagreements.jsonl``; the cards to render."""
    specs = (job.spec(0), job.spec(1))
    cards: list[dict[str, Any]] = []

    async def score(chunk: Chunk) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        rows = [row for _, row in chunk]
        a, b = await asyncio.gather(*(ascore_batch(rows, spec, verify) for spec in specs))
        return a, b

    def commit(chunk: Chunk, ours: list[dict[str, Any]], theirs: list[dict[str, Any]], out: Any) -> None:
        for (index, row), a, b in zip(chunk, ours, theirs):
            row_id = row.get(job.id_field)
            item = to_item(row, specs[0])
            if isinstance(item, str):
                tally.skip(index, row_id, item)
                continue
            response = item["response"] if "response" in item else final_text(item["messages"])
            record = tally.add(index, row_id, response, item["reference"],
                               {k: a.get(k) for k in RESULT_FIELDS}, {k: b.get(k) for k in RESULT_FIELDS},
                               job.tail_chars)
            if record is not None:
                out.write(dump(record))
                if len(cards) < job.max_cards:
                    cards.append(record)
        out.flush()
        on_progress(len(chunk))

    job.out.mkdir(parents=True, exist_ok=True)
    inflight: deque[tuple[Chunk, asyncio.Task[Any]]] = deque()
    # One local file, opened once and written between awaits like every chunk below: not worth a thread hop.
    with open(job.out / "disagreements.jsonl", "w", encoding="utf-8") as out:  # noqa: ASYNC230
        try:
            for chunk in chunks(job):
                inflight.append((chunk, asyncio.create_task(score(chunk))))
                while len(inflight) >= job.concurrency:
                    done, task = inflight.popleft()
                    ours, theirs = await task
                    commit(done, ours, theirs, out)
            while inflight:
                done, task = inflight.popleft()
                ours, theirs = await task
                commit(done, ours, theirs, out)
        finally:
            for _, task in inflight:
                task.cancel()
    return cards


def pairs_table(tally: DiffTally) -> Table:
    table = Table(title="verdict pairs", caption="a verdict without a score counts as its status, never as 0")
    for column in (*tally.names, "rows", "share", ""):
        table.add_column(column, justify="right" if column in ("rows", "share") else "left")
    for (a, b), n in tally.pairs.most_common():
        table.add_row(a, b, str(n), f"{n / max(tally.rows, 1):.1%}", "agree" if a == b else "[red]disagree[/red]")
    return table


def run(job: DiffJob, config: str | None, workers: int | None) -> None:
    from reward_service.batch.scorers import EmbeddedScorer
    from reward_service.resources.runtime import Runtime

    settings = load_settings(config, workers=workers)
    versions = check_job(job, settings)
    tally = DiffTally(job.names)
    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]diffing"), BarColumn(), MofNCompleteColumn(), RateColumn(), TextColumn("eta"),
        TimeRemainingColumn(), TextColumn("elapsed"), TimeElapsedColumn(), console=console,
    )
    task = progress.add_task("diffing", total=count_rows(job.input))

    async def main() -> list[dict[str, Any]]:
        async with Runtime.open(settings) as runtime:
            scorer = EmbeddedScorer(runtime.engine, settings.limits)
            return await run_diff(job, scorer, tally, lambda n: progress.advance(task, n))

    with progress:
        cards = asyncio.run(main())
    summary = tally.summary(job.options, versions, str(job.input), len(cards))
    (job.out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (job.out / "report.html").write_text(render_diff_html(summary, cards), encoding="utf-8")
    typer.echo(tally.agreement_line())
    Console(width=120).print(pairs_table(tally))
    if tally.skipped:
        typer.echo(f"skipped {len(tally.skipped)} rows that could not be sent (first: {tally.skipped[0]['reason']})")
    typer.echo(f"wrote {job.out / 'disagreements.jsonl'}, {job.out / 'report.html'} and {job.out / 'summary.json'}")
