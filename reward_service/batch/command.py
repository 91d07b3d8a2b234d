"""``reward-service score INPUT --out OUTPUT``: score a rollout file, resumably, embedded or against a server."""
from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
from reward_service.batch.rows import (
    AsyncVerifyBatch,
    RowSpec,
    UnreadableRow,
    ascore_batch,
    group_chunks,
    row_key,
    with_id,
)

if TYPE_CHECKING:
    from reward_service.resources.runtime import Runtime


class Exit(IntEnum):
    """How ``score`` ended (docs/batch-scoring.md); the summary table is printed in every case."""

    DONE = 0  # every input row is in the output and at least one has a score (or the input has no rows)
    SERVICE = 1  # --url: the service could not be reached, or stayed down past the retry budget; a rerun resumes
    USAGE = 2  # bad arguments, an unknown verifier, a named field missing from the rows: nothing was scored
    NOTHING_SCORED = 3  # every row is in the output, but not one has a score (the summary says why)
    INTERRUPTED = 130  # Ctrl-C; the rows committed so far are kept and a rerun resumes


class DuplicateId(ValueError):
    pass


# Rows read to check that the fields the command names exist: enough to see a typo, cheap on any file.
FIELD_SAMPLE_ROWS = 1000


@dataclass
class Tally:
    """Counts per status and the mean score, over every row in the output (earlier runs included)."""

    statuses: Counter[str] = field(default_factory=Counter)
    scored: int = 0
    score_sum: float = 0.0
    unscored_reasons: Counter[str] = field(default_factory=Counter)  # why rows have no score, for the summary

    def add(self, row: dict[str, Any]) -> None:
        self.statuses[str(row.get("status"))] += 1
        if isinstance(row.get("score"), (int, float)):
            self.scored += 1
            self.score_sum += float(row["score"])
        else:
            why = f"{row.get('status')}: {str(row.get('reason'))[:160]}"
            if why in self.unscored_reasons or len(self.unscored_reasons) < 1000:  # bounded on any input
                self.unscored_reasons[why] += 1

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

    def outcome(self) -> Exit:
        return Exit.NOTHING_SCORED if self.rows and not self.scored else Exit.DONE

    def print_summary(self, console: Console) -> None:
        """The table on stdout; when no row has a score, the commonest reasons on stderr."""
        Console().print(self.table())
        sys.stdout.flush()
        if self.outcome() is Exit.NOTHING_SCORED:
            console.print(f"no row has a score (exit code {int(Exit.NOTHING_SCORED)}); the commonest reasons:",
                          style="red", soft_wrap=True, markup=False, highlight=False)
            for reason, n in self.unscored_reasons.most_common(3):
                console.print(f"  {n} x {reason}", soft_wrap=True, markup=False, highlight=False)


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


def missing_fields(path: Path, named: dict[str, str]) -> tuple[str, str] | None:
    """The options and why the run must not start, or None: a field the command names (``named``: option -> field)
    is absent or null in more than half of the first rows, which is a typo far more often than an intended null.
    Names the fields the rows do have."""
    rows = [r for r in islice(read_rows(path), FIELD_SAMPLE_ROWS) if not isinstance(r, UnreadableRow)]
    if not rows:
        return None
    have: Counter[str] = Counter(k for row in rows for k, v in row.items() if v is not None)
    options, problems = [], []
    for option, name in named.items():
        n = have.get(name, 0)
        if 2 * n < len(rows):
            where = f"all {len(rows)}" if n == 0 else f"{len(rows) - n} of the {len(rows)}"
            options.append(option)
            problems.append(f"field {name!r} is missing from {where} rows read")
    if not problems:
        return None
    fields = ", ".join(repr(k) for k, _ in have.most_common(30)) or "none"
    return ", ".join(options), (f"{'; '.join(problems)} (the first rows of {path}). Fields the rows have: {fields}. "
                                "Pass --allow-missing-fields if that is intended.")


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


async def settle(runtime: Runtime, limit_s: float = 60.0) -> None:
    """Wait until what the runtime starts in the background (warm sandboxes, a local judge) has started or failed,
    as the server waits before /readyz says ready. A run that sends nothing would otherwise close the runtime while
    sandboxes are being spawned, and asyncio (3.11) cannot cancel a subprocess whose pipes are still connecting: its
    clean-up waits forever for pipes the sandbox's child holds, and the command never ended."""
    for _ in range(int(limit_s / 0.05)):  # polled: a resource's readiness is a flag, not an event
        # not ready and no reason given: still on its way (a reason: it failed)
        if not any(reason == "" for _, reason in runtime.resources.waiting()):
            return
        await asyncio.sleep(0.05)


async def _embedded(job: Job, config: str | None, workers: int | None, run: Callable[..., Awaitable[None]]) -> None:
    from reward_service.batch.scorers import EmbeddedScorer
    from reward_service.resources.runtime import Runtime
    from reward_service.settings import load_settings

    settings = load_settings(config, workers=workers)
    async with Runtime.open(settings) as runtime:
        await settle(runtime)
        if job.spec.verifier is not None and job.spec.verifier not in runtime.registry:
            raise typer.BadParameter(f"unknown verifier {job.spec.verifier!r}; known: "
                                     f"{', '.join(runtime.registry.names())}", param_hint="--verifier")
        await run(EmbeddedScorer(runtime.engine, settings.limits))


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


def _service_failure(exc: BaseException) -> str | None:
    """What to tell when the server was never reached, stayed down or refused the job (committed rows are safe, a
    rerun resumes); None for any other exception."""
    try:
        from reward_client import RewardServiceError, ServiceUnreachable
    except ImportError:  # pragma: no cover
        return None
    if isinstance(exc, ServiceUnreachable):
        return f"stopped: {exc}"
    if isinstance(exc, RewardServiceError):
        return f"stopped: {exc}\nrows scored so far are kept; run the same command to resume"
    return None


class ConsoleLog(logging.Handler):
    """The client's lines (a lost service, progress while waiting, its return) on the progress bar's console, so
    they print above the bar instead of through it."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        style = "yellow" if record.levelno >= logging.WARNING else None
        self.console.print(record.getMessage(), style=style, soft_wrap=True, markup=False, highlight=False)


def score(
    ctx: typer.Context,
    input: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Rollouts: .jsonl or .parquet.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output .jsonl or .parquet: input rows + score, status, reason, details.")],
    verifier: str | None = typer.Option(None, "--verifier", "-v", help="Verifier for every row."),
    verifier_field: str | None = typer.Option(None, help="Field naming each row's verifier (instead of --verifier)."),
    response_field: str = typer.Option("response", help="Field holding the model output."),
    messages_field: str = typer.Option(
        "messages", help="Field holding a trajectory (OpenAI chat messages), for rows without a response; "
        "'' scores responses only."),
    tools_field: str = typer.Option(
        "tools", help="Field holding the tool specs the model was given (with a trajectory or a response)."),
    reference_field: str = typer.Option("reference", help="Field holding the reference (absent: null reference)."),
    id_field: str = typer.Option("id", help="Unique row id, used to resume; rows without one get their position."),
    group_field: str | None = typer.Option(
        None, help="Field naming each row's group (e.g. the prompt id; consensus votes within it). A group's rows "
        "must be adjacent: chunks never cut a run of one group."),
    allow_missing_fields: bool = typer.Option(
        False, "--allow-missing-fields", help="Score even when a field named here (the response field, or any "
        "field given on the command line) is missing from most rows."),
    options: str = typer.Option("{}", help="Verifier options as a JSON object."),
    url: str | None = typer.Option(None, help="Score through this server instead of in-process."),
    token: str | None = typer.Option(None, envvar="REWARD_CLIENT_TOKEN", help="Bearer token for --url."),
    config: str | None = typer.Option(None, "--config", help="Settings file for embedded mode."),
    workers: int | None = typer.Option(None, help="Worker processes in embedded mode (default: one per core)."),
    concurrency: int = typer.Option(4, min=1, help="Chunks in flight at once."),
    chunk_size: int = typer.Option(256, min=1, help="Rows per chunk (one journal commit each)."),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Start over instead of resuming from an existing output."),
    ray: bool = typer.Option(
        False, "--ray", help="Score on a Ray cluster with ray.data (embedded runtimes in actors)."),
    ray_address: str | None = typer.Option(
        None, help="Ray cluster address (default: RAY_ADDRESS or a local instance)."),
    ray_actors: int = typer.Option(1, min=1, help="Ray actors, each with its own worker pool of --workers processes."),
) -> None:
    """Score a rollout file; killed and restarted with the same arguments, it resumes where it stopped.

    Exit codes: 0 done, 1 service unreachable or down (--url), 2 usage error, 3 no row got a score, 130 interrupted.
    """
    try:
        spec = RowSpec(response_field, reference_field, id_field, verifier, verifier_field, json.loads(options),
                       group_field, messages_field or None, tools_field)
        for path in (input, out):
            file_format(path)
    except (ValueError, json.JSONDecodeError) as exc:
        raise typer.BadParameter(str(exc)) from None
    if not isinstance(spec.options, dict):
        raise typer.BadParameter("--options must be a JSON object")
    if ray and url:
        raise typer.BadParameter("--ray scores in-process on the cluster; it cannot be combined with --url")
    if not allow_missing_fields:
        # The response field is needed by every row; the others only when given: a row without a reference is
        # scored with a null one, and rows without an id get their position.
        # Rows holding trajectories need no response.
        trajectories = bool(messages_field) and missing_fields(input, {"--messages-field": messages_field}) is None
        named = {"--response-field": None if trajectories else response_field, "--verifier-field": verifier_field,
                 "--group-field": group_field}
        for option, param in (("--reference-field", "reference_field"), ("--id-field", "id_field")):
            source = ctx.get_parameter_source(param)
            if source is not None and source.name != "DEFAULT":
                named[option] = ctx.params[param]
        problem = missing_fields(input, {k: v for k, v in named.items() if v is not None})
        if problem is not None:
            raise typer.BadParameter(problem[1], param_hint=problem[0])
    job = Job(input, out, spec, chunk_size, concurrency)
    if overwrite:
        for path in {job.out, job.journal_path}:
            path.unlink(missing_ok=True)
    console = Console(stderr=True)
    tally = Tally()
    if job.journal_path != job.out and job.out.exists() and not job.journal_path.exists():
        _tally_finished_parquet(job.out, tally)  # finished earlier: nothing left to do
        tally.print_summary(console)
        raise typer.Exit(tally.outcome())

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

    client_log = logging.getLogger("reward_client")
    handler = ConsoleLog(console)
    client_log.addHandler(handler)
    client_log.setLevel(logging.INFO)
    client_log.propagate = False
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
    except KeyboardInterrupt:
        console.print("interrupted: rows scored so far are kept; run the same command to resume")
        tally.print_summary(console)
        raise typer.Exit(Exit.INTERRUPTED) from None
    except Exception as exc:
        told = _service_failure(exc)
        if told is None:
            raise
        console.print(told, style="red", soft_wrap=True, markup=False, highlight=False)
        tally.print_summary(console)
        raise typer.Exit(Exit.SERVICE) from None
    finally:
        client_log.removeHandler(handler)
        client_log.propagate = True
    tally.print_summary(console)
    raise typer.Exit(tally.outcome())
