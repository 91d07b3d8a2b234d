"""``reward-service score INPUT --out OUTPUT``: score a rollout file, resumably, embedded or against a server."""
from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from reward_service.batch.files import Journal, count_rows, file_format, parquet_schema, read_rows, write_parquet
from reward_service.batch.rows import AsyncVerifyBatch, RowSpec, ascore_batch, group_chunks, row_key, with_id


class DuplicateId(ValueError):
    pass


@dataclass
class Tally:
    """Counts per status and the mean score, over every row in the output (earlier runs included)."""

    statuses: Counter[str] = field(default_factory=Counter)
    scored: int = 0
    score_sum: float = 0.0

    def add(self, row: dict[str, Any]) -> None:
        self.statuses[str(row.get("status"))] += 1
        if isinstance(row.get("score"), (int, float)):
            self.scored += 1
            self.score_sum += float(row["score"])

    @property
    def rows(self) -> int:
        return sum(self.statuses.values())

    def table(self) -> Table:
        table = Table(title="scored rows")
        table.add_column("status")
        table.add_column("rows", justify="right")
        table.add_column("share", justify="right")
        for status, n in self.statuses.most_common():
            table.add_row(status, str(n), f"{n / max(self.rows, 1):.1%}")
        mean = f"{self.score_sum / self.scored:.4f}" if self.scored else "n/a"
        table.add_section()
        table.add_row("total", str(self.rows), "")
        table.add_row("mean score", mean, f"over {self.scored} scored")
        return table


class RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} rows/s" if speed else "-- rows/s", style="progress.data.speed")


@dataclass
class Job:
    input: Path
    out: Path
    spec: RowSpec
    chunk_size: int = 256
    concurrency: int = 4

    @property
    def journal_path(self) -> Path:
        return self.out if file_format(self.out) == "jsonl" else self.out.with_name(self.out.name + ".journal.jsonl")


def pending_rows(job: Job, journal: Journal, tally: Tally,
                 on_start: Callable[[int, int], None] = lambda total, done: None) -> Iterator[dict[str, Any]]:
    """Input rows not yet in the journal, with ids, in input order; rows already done are tallied."""
    done: set[Any] = set()
    for row in journal.recover():
        done.add(row_key(row.get(job.spec.id_field)))
        tally.add(row)
    on_start(count_rows(job.input), len(done))
    seen: set[Any] = set()
    for index, raw in enumerate(read_rows(job.input)):
        row = with_id(raw, index, job.spec)
        key = row_key(row[job.spec.id_field])
        if key in seen:
            raise DuplicateId(f"id {key!r} appears twice in {job.input} (row {index}); resuming needs unique "
                              f"ids: pick another --id-field")
        seen.add(key)
        if key not in done:
            yield row


def finish_output(job: Job) -> None:
    if job.journal_path != job.out:
        schema = parquet_schema(job.input) if file_format(job.input) == "parquet" else None
        write_parquet(job.journal_path, job.out, schema)
        job.journal_path.unlink()


async def run_job(job: Job, verify: AsyncVerifyBatch, tally: Tally,
                  on_progress: Callable[[int], None] = lambda n: None,
                  on_start: Callable[[int, int], None] = lambda total, done: None) -> None:
    """Score every row of the input not yet in the journal; chunks run concurrently but commit in input order."""
    journal = Journal(job.journal_path)
    inflight: deque[asyncio.Task[list[dict[str, Any]]]] = deque()

    async def drain(keep: int) -> None:
        while len(inflight) > keep:
            rows = await inflight.popleft()
            journal.commit(rows)
            for row in rows:
                tally.add(row)
            on_progress(len(rows))

    try:
        for chunk in group_chunks(pending_rows(job, journal, tally, on_start), job.chunk_size, job.spec.group_field):
            inflight.append(asyncio.create_task(ascore_batch(chunk, job.spec, verify)))
            await drain(job.concurrency - 1)
        await drain(0)
    finally:
        for task in inflight:
            task.cancel()
        journal.close()
    finish_output(job)


def run_ray_job(job: Job, tally: Tally, *, address: str | None, actors: int, workers: int | None,
                config: str | None, on_progress: Callable[[int], None] = lambda n: None,
                on_start: Callable[[int, int], None] = lambda total, done: None) -> None:
    """The same job on a Ray cluster (``--ray``): scoring in ray.data actors, journal commits here, in order."""
    from reward_service.batch.ray_runner import run_on_ray

    journal = Journal(job.journal_path)

    def commit(rows: list[dict[str, Any]]) -> None:
        journal.commit(rows)
        for row in rows:
            tally.add(row)
        on_progress(len(rows))

    try:
        run_on_ray(pending_rows(job, journal, tally, on_start), job.spec, commit, address=address, actors=actors,
                   workers=workers, config=config, chunk_size=job.chunk_size)
    finally:
        journal.close()
    finish_output(job)


def _tally_finished_parquet(out: Path, tally: Tally) -> None:
    import pyarrow.parquet as pq

    for row in pq.read_table(out, columns=["score", "status"]).to_pylist():
        tally.add(row)


async def _embedded(job: Job, config: str | None, workers: int | None, run: Callable[..., Awaitable[None]]) -> None:
    from reward_service.batch.scorers import EmbeddedScorer
    from reward_service.runtime import Runtime
    from reward_service.settings import load_settings

    settings = load_settings(config, workers=workers)
    async with Runtime.open(settings) as runtime:
        if job.spec.verifier is not None and job.spec.verifier not in runtime.registry:
            raise typer.BadParameter(f"unknown verifier {job.spec.verifier!r}; known: "
                                     f"{', '.join(runtime.registry.names())}", param_hint="--verifier")
        await run(EmbeddedScorer(runtime.engine))


async def _remote(job: Job, url: str, token: str | None, run: Callable[..., Awaitable[None]]) -> None:
    try:
        from reward_client import AsyncRewardClient
    except ImportError:  # pragma: no cover - the client ships beside the service
        raise typer.BadParameter("--url needs the client package: pip install ./clients") from None
    from reward_service.batch.scorers import RemoteScorer

    async with AsyncRewardClient(url, token=token, chunk_size=job.chunk_size,
                                 max_concurrency=job.concurrency) as client:
        if job.spec.verifier is not None:
            names = [v.get("name") for v in await client.verifiers()]
            if job.spec.verifier not in names:
                raise typer.BadParameter(f"unknown verifier {job.spec.verifier!r} on {url}; known: "
                                         f"{', '.join(map(str, names))}", param_hint="--verifier")
        await run(RemoteScorer(client))


def _service_failure(exc: BaseException) -> bool:
    """The server stayed down or refused the job: committed rows are safe, a rerun resumes."""
    try:
        from reward_client import RewardServiceError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, RewardServiceError)


def score(
    input: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Rollouts: .jsonl or .parquet.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output .jsonl or .parquet: input rows + score, status, reason, details.")],
    verifier: str | None = typer.Option(None, "--verifier", "-v", help="Verifier for every row."),
    verifier_field: str | None = typer.Option(None, help="Field naming each row's verifier (instead of --verifier)."),
    response_field: str = typer.Option("response", help="Field holding the model output."),
    reference_field: str = typer.Option("reference", help="Field holding the reference (absent: null reference)."),
    id_field: str = typer.Option("id", help="Unique row id, used to resume; rows without one get their position."),
    group_field: str | None = typer.Option(
        None, help="Field naming each row's group (e.g. the prompt id; consensus votes within it). A group's rows "
        "must be adjacent: chunks never cut a run of one group."),
    options: str = typer.Option("{}", help="Verifier options as a JSON object."),
    url: str | None = typer.Option(None, help="Score through this server instead of in-process."),
    token: str | None = typer.Option(None, envvar="REWARD_CLIENT_TOKEN", help="Bearer token for --url."),
    config: str | None = typer.Option(None, "--config", help="Settings file for embedded mode."),
    workers: int | None = typer.Option(None, help="Worker processes in embedded mode (default: one per core)."),
    concurrency: int = typer.Option(4, min=1, help="Chunks in flight at once."),
    chunk_size: int = typer.Option(256, min=1, help="Rows per chunk (one journal commit each)."),
    overwrite: bool = typer.Option(False, help="Start over instead of resuming from an existing output."),
    ray: bool = typer.Option(
        False, "--ray", help="Score on a Ray cluster with ray.data (embedded runtimes in actors)."),
    ray_address: str | None = typer.Option(
        None, help="Ray cluster address (default: RAY_ADDRESS or a local instance)."),
    ray_actors: int = typer.Option(1, min=1, help="Ray actors, each with its own worker pool of --workers processes."),
) -> None:
    """Score a rollout file; killed and restarted with the same arguments, it resumes where it stopped."""
    try:
        spec = RowSpec(response_field, reference_field, id_field, verifier, verifier_field, json.loads(options),
                       group_field)
        for path in (input, out):
            file_format(path)
    except (ValueError, json.JSONDecodeError) as exc:
        raise typer.BadParameter(str(exc)) from None
    if not isinstance(spec.options, dict):
        raise typer.BadParameter("--options must be a JSON object")
    job = Job(input, out, spec, chunk_size, concurrency)
    if overwrite:
        for path in {job.out, job.journal_path}:
            path.unlink(missing_ok=True)
    console = Console(stderr=True)
    tally = Tally()
    if job.journal_path != job.out and job.out.exists() and not job.journal_path.exists():
        _tally_finished_parquet(job.out, tally)  # finished earlier: nothing left to do
        Console().print(tally.table())
        return

    progress = Progress(
        TextColumn("[bold]scoring"), BarColumn(), MofNCompleteColumn(), RateColumn(), TextColumn("eta"),
        TimeRemainingColumn(), TextColumn("elapsed"), TimeElapsedColumn(), console=console,
    )
    task = progress.add_task("scoring", total=None)

    def on_start(total: int, done: int) -> None:
        progress.update(task, total=total, completed=done)
        if done:
            console.print(f"resuming: {done} of {total} rows already in {job.journal_path}")

    async def run(verify: AsyncVerifyBatch) -> None:
        await run_job(job, verify, tally, on_progress=lambda n: progress.advance(task, n), on_start=on_start)

    if ray and url:
        raise typer.BadParameter("--ray scores in-process on the cluster; it cannot be combined with --url")
    try:
        with progress:
            if ray:
                run_ray_job(job, tally, address=ray_address, actors=ray_actors, workers=workers, config=config,
                            on_progress=lambda n: progress.advance(task, n), on_start=on_start)
            elif url:
                asyncio.run(_remote(job, url, token, run))
            else:
                asyncio.run(_embedded(job, config, workers, run))
    except DuplicateId as exc:
        raise typer.BadParameter(str(exc), param_hint="--id-field") from None
    except Exception as exc:
        if _service_failure(exc):
            console.print(f"[red]stopped: {exc}[/red]\nrows scored so far are kept; run the same command to resume")
            raise typer.Exit(1) from None
        raise
    Console().print(tally.table())
    sys.stdout.flush()
