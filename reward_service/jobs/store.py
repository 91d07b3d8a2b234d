"""The job store: accepted items and finished verdicts on disk (SQLite, embedded: no server to run), so a job outlives
a SIGKILL of the server. A restarted server reads back every job whose results have not expired: finished verdicts
are served from here, unfinished items are scored again.

What it costs per item is kept near nothing, since every job item pays it: a job is one row holding the request body
as it was sent (the bytes the server already has, not each item encoded again; in a table of its own, so that a
change of the job's state does not rewrite it), written in one commit before the job is answered. Verdicts are
appended in batches, one row per job and batch holding their ``index<TAB>JSON`` lines (``JobStore.put_verdicts``:
the manager writes what was decided every 50 ms, and hands verdicts to clients only once written). SQLite in WAL
mode with ``synchronous=NORMAL``: a commit survives the process being killed (what a restart after SIGKILL needs; an
OS crash may lose the last commits, whose verdicts are then scored again). A verdict decided but not yet written
when the server is killed was never seen by a client, and is scored again after the restart. Called on the event
loop: each call is one short transaction, the largest a job's body (about 1-2 us of CPU per item, against the tens
the server spent parsing and validating it). One store per server: two servers on one file would each resume the
other's jobs.
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
CREATE TABLE IF NOT EXISTS bodies (
    job TEXT PRIMARY KEY,
    body BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS verdicts (
    job TEXT NOT NULL,
    lines TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS verdicts_job ON verdicts (job);
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
    texts: list[str | None]  # the verdicts as stored (JSON text)


def verdict_lines(decided: Iterable[tuple[int, str]]) -> str:
    """(index, verdict as JSON text) pairs as the store keeps them: JSON text holds no raw tab or newline."""
    return "\n".join(f"{index}\t{text}" for index, text in decided)


class JobStore:
    def __init__(self, path: str) -> None:
        file = Path(os.path.expanduser(path))
        file.parent.mkdir(parents=True, exist_ok=True)
        self.path = file
        self.db = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
        self.writes = 0  # transactions committed (for /metrics)
        self.verdicts_written = 0
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self._upgrade()
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def add(self, job: StoredJob, body: bytes) -> None:
        """A new job, ``body`` the request as sent: its ``items`` are ``job.bodies``."""
        self.writes += 1
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (job.id, job.client, job.priority, json.dumps(job.tags), job.created, job.ended,
                             job.state, len(job.bodies)))
            self.db.execute("INSERT INTO bodies VALUES (?, ?)", (job.id, body))

    def put_verdicts(self, rows: Iterable[tuple[str, str]], count: int = 0) -> None:
        """(job, ``verdict_lines``) rows, in one transaction; ``count``: the verdicts they hold (for /metrics)."""
        self.writes += 1
        self.verdicts_written += count
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT INTO verdicts VALUES (?, ?)", rows)

    def set_state(self, job: str, state: str, ended: float | None) -> None:
        self.writes += 1
        with self.db:
            self.db.execute("UPDATE jobs SET state = ?, ended = ? WHERE id = ?", (state, ended, job))

    def delete(self, jobs: Iterable[str]) -> None:
        self.writes += 1
        ids = [(j,) for j in jobs]
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("DELETE FROM verdicts WHERE job = ?", ids)
            self.db.executemany("DELETE FROM bodies WHERE job = ?", ids)
            self.db.executemany("DELETE FROM jobs WHERE id = ?", ids)

    def size_bytes(self) -> int:
        """The store's size on disk: its file and its write-ahead log."""
        total = 0
        for part in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                total += part.stat().st_size
            except OSError:
                pass
        return total

    def load(self) -> Iterator[StoredJob]:
        """Every stored job with its items and the verdicts already decided."""
        rows = self.db.execute("SELECT id, client, priority, tags, created, ended, state, n, body FROM jobs "
                               "JOIN bodies ON bodies.job = jobs.id ORDER BY created").fetchall()
        for jid, client, priority, tags, created, ended, state, n, body in rows:
            sent = json.loads(body)
            bodies: list[dict[str, Any]] = sent["items"] if isinstance(sent, dict) else sent
            texts: list[str | None] = [None] * n
            for (lines,) in self.db.execute("SELECT lines FROM verdicts WHERE job = ? ORDER BY rowid", (jid,)):
                for line in lines.split("\n"):
                    index, _, text = line.partition("\t")
                    idx = int(index)
                    if 0 <= idx < n and texts[idx] is None:
                        texts[idx] = text
            yield StoredJob(jid, client, priority, json.loads(tags), created, ended, state, bodies, texts)

    def _upgrade(self) -> None:
        """A store written by an earlier version (a row per item, its body encoded on its own): rewritten in
        this layout, in one transaction, so its jobs go on after the upgrade."""
        tables = {name for (name,) in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "items" not in tables:
            return
        with self.db:
            self.db.execute("BEGIN")
            old = self.db.execute("SELECT id, client, priority, tags, created, ended, state, n FROM jobs").fetchall()
            self.db.execute("ALTER TABLE jobs RENAME TO jobs_old")
            for statement in SCHEMA.split(";"):  # not executescript, which would commit here
                if statement.strip():
                    self.db.execute(statement)
            for jid, client, priority, tags, created, ended, state, n in old:
                bodies: list[Any] = [{} for _ in range(n)]
                decided: list[tuple[int, str]] = []
                for idx, body, result in self.db.execute("SELECT idx, body, result FROM items WHERE job = ?",
                                                         (jid,)):
                    if 0 <= idx < n:
                        bodies[idx] = json.loads(body)
                        if result is not None:
                            decided.append((idx, result))
                self.db.execute("INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                (jid, client, priority, tags, created, ended, state, n))
                self.db.execute("INSERT INTO bodies VALUES (?, ?)", (jid, json.dumps({"items": bodies}).encode()))
                if decided:
                    self.db.execute("INSERT INTO verdicts VALUES (?, ?)", (jid, verdict_lines(decided)))
            self.db.execute("DROP TABLE items")
            self.db.execute("DROP TABLE jobs_old")
