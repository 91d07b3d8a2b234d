"""``sql``: a read-only session on one of the server's SQLite databases (the ``sql`` verifier's, named at reset).

A step is one query (``{"query": ...}``) run with every guard the ``sql`` verifier applies
(``verifiers.kinds.sql.execute``: one SELECT/WITH/VALUES statement, an immutable read-only file, the authorizer's
allow-list, SQLite's limits, a time budget and row and byte caps); the observation is the columns and at most
``sql_max_rows`` rows, or the named failure (refused, syntax, timeout, too_large, memory, error) as the policy's
own error. Queries run in a worker thread: SQLite's progress handler ends one at its time budget.
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from environments.base import Environment, EnvResources, Step, Task, Tool
from environments.errors import InfraError, InvalidRequest
from verifiers.kinds.sql.databases import ENV_VAR, resolve_database
from verifiers.kinds.sql.execute import QueryFailed, QueryLimits, run_query
from verifiers.types import InvalidReference

MAX_QUERY_CHARS = 100_000
MAX_CELL_CHARS = 2000  # one value as the observation shows it


class SqlTask(Task):
    database: str = Field(..., description="A database of the server's sql verifier directory (NAME).")
    prompt: str | None = Field(None, description="The task as the user's message (opens the transcript).")


class SqlAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., max_length=MAX_QUERY_CHARS, description="One SELECT, WITH or VALUES statement.")


class SqlObservation(BaseModel):
    status: str = Field(description="ok, or the failure's kind: refused, syntax, timeout, too_large, memory, error")
    columns: list[str] = Field(default_factory=list)
    rows: list[list[Any]] = Field(default_factory=list)
    truncated: bool = Field(False, description="more rows were there than the observation carries")
    error: str | None = None
    elapsed_ms: float = 0.0
    session_id: str = ""


QUERY = Tool("query", "Run one read-only SQL query (SELECT, WITH or VALUES) on this session's SQLite database; "
             "returns the columns and the first rows.",
             {"type": "object", "properties": {"query": {"type": "string", "description": "The SQL query."}},
              "required": ["query"], "additionalProperties": False})


def _cell(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<blob of {len(value)} bytes>"
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS] + "..."
    return value


def _text(obs: dict[str, Any]) -> str:
    if obs["status"] != "ok":
        return f"error ({obs['status']}): {obs['error']}"
    lines = [" | ".join(obs["columns"])] + [" | ".join(str(v) for v in row) for row in obs["rows"]]
    if obs["truncated"]:
        lines.append(f"... (first {len(obs['rows'])} rows)")
    return "\n".join(lines)


def _database(configured: str, name: str) -> Path:
    """The database file ``name`` names in the configured directory (raises ``InvalidReference`` for a bad name)."""
    if not configured or not Path(configured).is_dir():
        raise InfraError("no SQL databases directory is configured on this server (sql_databases_dir)")
    return resolve_database(Path(configured), name)


class SqlEnvironment(Environment):
    name = "sql"
    description = "A read-only SQLite database per session: one query per step, with the sql verifier's guards."
    task_model = SqlTask
    action_model = SqlAction
    observation_model = SqlObservation
    tools = (QUERY,)

    def __init__(self, resources: EnvResources) -> None:
        super().__init__(resources)
        self._path: Path | None = None
        self._database = ""

    async def reset(self, task: Task, seed: int | None) -> dict[str, Any]:
        assert isinstance(task, SqlTask)
        configured = self.resources.sql_databases_dir or os.environ.get(ENV_VAR, "")
        try:
            self._path = await asyncio.to_thread(_database, configured, task.database)
        except InvalidReference as exc:
            raise InvalidRequest(str(exc), field="database") from None
        self._database = task.database
        tables = await self._run("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", 5.0)
        return {**tables, "columns": ["table"], "database": task.database}

    async def _run(self, sql: str, timeout_s: float) -> dict[str, Any]:
        assert self._path is not None
        limits = QueryLimits(timeout_s=min(timeout_s, 30.0), max_rows=100_000, max_result_bytes=16 << 20)
        most = self.resources.sql_max_rows
        try:
            result = await asyncio.to_thread(run_query, self._path, sql, limits, most)
        except QueryFailed as exc:
            return {"status": exc.kind, "columns": [], "rows": [], "truncated": False, "error": exc.message,
                    "elapsed_ms": 0.0}
        return {"status": "ok", "columns": list(result.columns), "rows": [[_cell(v) for v in r] for r in result.rows],
                "truncated": not result.complete, "error": None, "elapsed_ms": result.elapsed_ms}

    async def step(self, action: BaseModel, timeout_s: float) -> Step:
        assert isinstance(action, SqlAction)
        obs = await self._run(action.query, timeout_s)
        return Step(obs, transcript_text=_text(obs), status=obs["status"])

    def state(self) -> dict[str, Any]:
        return {"database": self._database}


ENVIRONMENTS = [SqlEnvironment]
