"""The job store: accepted items and finished verdicts on disk (SQLite, embedded: no server to run), so a job outlives
a SIGKILL of the server. A restarted server reads back every job whose results have not expired: finished verdicts
are served from here, unfinished items are scored again.

SQLite in WAL mode with ``synchronous=NORMAL``: a commit survives the process being killed (what a restart after
SIGKILL needs; an OS crash may lose the last commits, which are then scored again). Verdicts are written in batches
(``JobStore.put_verdicts``, flushed by the manager every 50 ms and before any verdict is handed to a client), so the
store costs a few microseconds per item, not a commit each; a verdict decided but not yet written when the server is
killed was never seen by a client, and is scored again after the restart. Called on the event loop: each call is
one short transaction. One store per server: two servers on one file would each resume the other's jobs.
"""
from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    client TEXT NOT NULL,
    priority TEXT NOT NULL,
    tags TEXT NOT NULL,
    created REAL NOT NULL,
    ended REAL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    job TEXT NOT NULL,
    idx INTEGER NOT NULL,
    body TEXT NOT NULL,
    result TEXT,
    PRIMARY KEY (job, idx)
) WITHOUT ROWID;
"""


@dataclass
class StoredJob:
    id: str
    client: str
    priority: str
    tags: list[str]
    created: float
    ended: float | None
    state: str
    bodies: list[dict[str, Any]]
    results: list[dict[str, Any] | None]
    texts: list[str | None]  # the results as stored (JSON text)


class JobStore:
    def __init__(self, path: str) -> None:
        file = Path(os.path.expanduser(path))
        file.parent.mkdir(parents=True, exist_ok=True)
        self.path = file
        self.db = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def add(self, job: StoredJob) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (job.id, job.client, job.priority, json.dumps(job.tags), job.created, job.ended,
                             job.state, len(job.bodies)))
            self.db.executemany("INSERT INTO items VALUES (?, ?, ?, NULL)",
                                ((job.id, i, json.dumps(body)) for i, body in enumerate(job.bodies)))

    def put_verdicts(self, rows: Iterable[tuple[str, int, str]]) -> None:
        """(job, index, the verdict as JSON text) rows."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("UPDATE items SET result = ? WHERE job = ? AND idx = ?",
                                ((text, job, idx) for job, idx, text in rows))

    def set_state(self, job: str, state: str, ended: float | None) -> None:
        with self.db:
            self.db.execute("UPDATE jobs SET state = ?, ended = ? WHERE id = ?", (state, ended, job))

    def delete(self, jobs: Iterable[str]) -> None:
        ids = [(j,) for j in jobs]
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("DELETE FROM items WHERE job = ?", ids)
            self.db.executemany("DELETE FROM jobs WHERE id = ?", ids)

    def load(self) -> Iterator[StoredJob]:
        """Every stored job with its items and the verdicts already decided."""
        rows = self.db.execute("SELECT id, client, priority, tags, created, ended, state, n FROM jobs "
                               "ORDER BY created").fetchall()
        for jid, client, priority, tags, created, ended, state, n in rows:
            bodies: list[dict[str, Any]] = [{} for _ in range(n)]
            results: list[dict[str, Any] | None] = [None] * n
            texts: list[str | None] = [None] * n
            for idx, body, result in self.db.execute("SELECT idx, body, result FROM items WHERE job = ?", (jid,)):
                if 0 <= idx < n:
                    bodies[idx] = json.loads(body)
                    results[idx] = json.loads(result) if result is not None else None
                    texts[idx] = result
            yield StoredJob(jid, client, priority, json.loads(tags), created, ended, state, bodies, results, texts)
