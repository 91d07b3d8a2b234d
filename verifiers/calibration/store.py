"""Where calibrations live: an interface, and SQLite behind it.

Counts are kept per (configuration, source): re-running the same labelled audit replaces its own row instead of
counting the same labels twice, while different audits add up. Appeal counters are incremented in place.
Every write is one atomic ``INSERT ... ON CONFLICT DO UPDATE`` so several processes (server workers, a CLI audit)
can write the same file at once; WAL lets readers go on during writes, and the busy timeout makes a writer wait
for the lock instead of failing.
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

from verifiers.calibration.key import ConfigKey
from verifiers.calibration.rates import AppealCounts, Calibration, Counts


@runtime_checkable
class CalibrationStore(Protocol):
    """What the engine and the audits need; a PostgreSQL store would implement the same five methods."""

    def set_counts(self, key: ConfigKey, counts: Counts, source: str) -> None:
        """Replace the counts one source (one audit) contributed to ``key``."""

    def add_counts(self, key: ConfigKey, counts: Counts, source: str) -> None:
        """Add to the counts of one source (streams of labels)."""

    def add_appeals(self, key: ConfigKey, delta: AppealCounts) -> None:
        """Add to the online appeal counters of ``key``."""

    def get(self, key: ConfigKey) -> Calibration | None:
        """All counts for ``key`` summed over sources, with its appeal counters; None if nothing is known."""

    def entries(self) -> list[Calibration]:
        """Every configuration the store knows."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS counts (
    verifier TEXT NOT NULL, version TEXT NOT NULL, options_hash TEXT NOT NULL, source TEXT NOT NULL,
    tp INTEGER NOT NULL DEFAULT 0, fp INTEGER NOT NULL DEFAULT 0,
    tn INTEGER NOT NULL DEFAULT 0, fn INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    PRIMARY KEY (verifier, version, options_hash, source)
);
CREATE TABLE IF NOT EXISTS appeals (
    verifier TEXT NOT NULL, version TEXT NOT NULL, options_hash TEXT NOT NULL,
    positives INTEGER NOT NULL DEFAULT 0, negatives INTEGER NOT NULL DEFAULT 0,
    appealed INTEGER NOT NULL DEFAULT 0, overturned INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    PRIMARY KEY (verifier, version, options_hash)
);
"""


class SQLiteCalibrationStore:
    """The default store: one SQLite file, one connection per thread."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._connect().executescript(_SCHEMA)  # executescript commits on its own; IF NOT EXISTS makes it idempotent

    def _connect(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")  # take the write lock up front: no upgrade deadlock between writers
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _write_counts(self, key: ConfigKey, c: Counts, source: str, *, add: bool) -> None:
        update = (
            "tp = tp + excluded.tp, fp = fp + excluded.fp, tn = tn + excluded.tn, fn = fn + excluded.fn"
            if add else "tp = excluded.tp, fp = excluded.fp, tn = excluded.tn, fn = excluded.fn"
        )
        with self._tx() as db:
            db.execute(
                "INSERT INTO counts (verifier, version, options_hash, source, tp, fp, tn, fn, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (verifier, version, options_hash, source) "
                f"DO UPDATE SET {update}, updated_at = excluded.updated_at",
                (key.name, key.version, key.options_hash, source, c.tp, c.fp, c.tn, c.fn, time.time()),
            )

    def set_counts(self, key: ConfigKey, counts: Counts, source: str) -> None:
        self._write_counts(key, counts, source, add=False)

    def add_counts(self, key: ConfigKey, counts: Counts, source: str) -> None:
        self._write_counts(key, counts, source, add=True)

    def add_appeals(self, key: ConfigKey, delta: AppealCounts) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO appeals (verifier, version, options_hash, positives, negatives, appealed, overturned, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (verifier, version, options_hash) DO UPDATE "
                "SET positives = positives + excluded.positives, negatives = negatives + excluded.negatives, "
                "appealed = appealed + excluded.appealed, overturned = overturned + excluded.overturned, "
                "updated_at = excluded.updated_at",
                (key.name, key.version, key.options_hash, delta.positives, delta.negatives, delta.appealed,
                 delta.overturned, time.time()),
            )

    def get(self, key: ConfigKey) -> Calibration | None:
        found = self._load("WHERE verifier = ? AND version = ? AND options_hash = ?",
                           (key.name, key.version, key.options_hash))
        return found[0] if found else None

    def entries(self) -> list[Calibration]:
        return self._load("", ())

    def _load(self, where: str, args: tuple[str, ...]) -> list[Calibration]:
        db = self._connect()
        found: dict[tuple[str, str, str], Calibration] = {}
        for name, version, h, source, tp, fp, tn, fn in db.execute(
            f"SELECT verifier, version, options_hash, source, tp, fp, tn, fn FROM counts {where} "
            "ORDER BY verifier, version, options_hash, source", args,
        ):
            cal = found.setdefault((name, version, h), Calibration(name, version, h))
            cal.counts = cal.counts + Counts(tp, fp, tn, fn)
            cal.sources.append(source)
        for name, version, h, *appeal in db.execute(
            f"SELECT verifier, version, options_hash, positives, negatives, appealed, overturned FROM appeals {where}",
            args,
        ):
            found.setdefault((name, version, h), Calibration(name, version, h)).appeals = AppealCounts(*appeal)
        return [found[k] for k in sorted(found)]

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
