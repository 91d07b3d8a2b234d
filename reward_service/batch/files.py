"""Rollout files: reading JSONL or Parquet row by row, and an append-only journal that survives SIGKILL.

Resumability rests on one rule: a scored chunk is appended to the journal in one write and fsync'd before the next
one starts, so after any crash the journal holds whole lines for finished rows plus at most one torn last line,
which recovery cuts off. The rows in it are the done set; a restart skips them. JSONL output *is* its journal;
Parquet output (which cannot be appended to) is written from the journal once every row is in, by an atomic rename.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reward_service.batch.rows import RESULT_FIELDS, UnreadableRow

PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


def file_format(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    raise ValueError(f"{path}: unknown format; use a .jsonl or .parquet name")


def count_rows(path: Path) -> int:
    if file_format(path) == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def read_rows(path: Path, batch_rows: int = 1024) -> Iterator[dict[str, Any]]:
    """Rows in file order; blank JSONL lines are not rows, malformed ones are ``UnreadableRow``s."""
    if file_format(path) == "parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows):
            yield from batch.to_pylist()
        return
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield UnreadableRow(f"input line {number} is not valid JSON: {exc}")
                continue
            yield row if isinstance(row, dict) else UnreadableRow(f"input line {number} is not a JSON object")


def dump_line(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, default=str) + "\n"


class Journal:
    """Append-only JSONL with fsync'd commits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None

    def recover(self) -> Iterator[dict[str, Any]]:
        """Cut a torn last line (a write interrupted by a kill), then yield every committed row."""
        if not self.path.exists():
            return
        with open(self.path, "r+b") as f:
            data = f.read()
            end = data.rfind(b"\n") + 1
            if end != len(data):
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        for number, line in enumerate(data[:end].splitlines(), 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    raise ValueError(
                        f"{self.path}: line {number} is not JSON; not an output of this command?") from None

    def commit(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab")
        self._file.write("".join(dump_line(r) for r in rows).encode("utf-8"))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def parquet_schema(input_path: Path) -> Any:
    """The input's own schema plus the result columns, when the input is Parquet (keeps its column types)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = pq.read_schema(input_path)
    result_types = {"score": pa.float64(), "status": pa.string(), "reason": pa.string(), "details": pa.string(),
                    "turn_scores": pa.list_(pa.float64())}
    fields = [f for f in base if f.name not in RESULT_FIELDS]
    return pa.schema([*fields, *(pa.field(name, result_types[name]) for name in RESULT_FIELDS)])


def _infer_table(rows: list[dict[str, Any]]) -> Any:
    """Column by column, so one column of mixed types (ids that are numbers here and strings there) is stored as
    text instead of failing the whole file."""
    import pyarrow as pa

    names = list(dict.fromkeys(k for row in rows for k in row))
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[name] = pa.array([v if v is None or isinstance(v, str) else json.dumps(v, default=str)
                                      for v in values], pa.string())
    return pa.table(columns)


def write_parquet(journal: Path, out: Path, schema: Any = None) -> None:
    """Journal → Parquet, atomically. ``details`` is stored as a JSON string: its keys differ per verifier."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(Journal(journal).recover())
    for row in rows:
        row["details"] = json.dumps(row.get("details") or {}, ensure_ascii=False, default=str)
    table = None
    if schema is not None:
        try:
            table = pa.Table.from_pylist(rows, schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            table = None  # e.g. ids filled in from positions where the input's id column was null: infer instead
    if table is None:
        table = _infer_table(rows)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, out)
