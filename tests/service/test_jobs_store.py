"""The job store on disk: a job's request body kept as sent, its verdicts appended in batches and read back once
each, its state changed without rewriting its body, and a store written by the earlier layout (a row per item)
read on after an upgrade."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from reward_service.jobs.store import JobStore, StoredJob, verdict_lines

ITEMS = [{"verifier": "exact_match", "response": f"a\tb\n{i}", "reference": "x", "id": f"i{i}"} for i in range(4)]


def new_job(job_id: str) -> StoredJob:
    return StoredJob(job_id, "127.0.0.1", "high", ["step:3"], 1.0, None, "queued", ITEMS, [None] * 4)


def verdict(i: int) -> str:
    # A reason with a tab and a newline in it: JSON text escapes them, so the store's lines stay one per verdict.
    return json.dumps({"id": f"i{i}", "score": 0.0, "status": "ok", "reason": "tab\there\nnewline"})


def test_a_job_reads_back_with_its_body_as_sent_and_each_verdict_once(tmp_path: Path) -> None:
    path = str(tmp_path / "jobs.sqlite3")
    sent = json.dumps({"items": ITEMS, "priority": "high", "tags": ["step:3"]}).encode()
    store = JobStore(path)
    store.add(new_job("job-a"), sent)
    store.put_verdicts([("job-a", verdict_lines([(2, verdict(2)), (0, verdict(0))]))])
    store.put_verdicts([("job-a", verdict_lines([(2, verdict(99))]))])  # a second verdict for an item is ignored
    store.close()

    store = JobStore(path)
    (job,) = list(store.load())
    assert job.bodies == ITEMS and job.tags == ["step:3"] and job.priority == "high" and job.state == "queued"
    assert job.texts == [verdict(0), None, verdict(2), None]
    assert json.loads(job.texts[2] or "")["reason"] == "tab\there\nnewline"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT body FROM bodies").fetchone() == (sent,), "the body is kept as sent"
    store.set_state("job-a", "done", 5.0)
    assert [(j.state, j.ended) for j in store.load()] == [("done", 5.0)]
    store.delete(["job-a"])
    assert not list(store.load())
    with sqlite3.connect(path) as db:
        left = [db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("jobs", "bodies", "verdicts")]
    assert left == [0, 0, 0]
    store.close()


def test_a_store_in_the_earlier_layout_is_upgraded_with_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE jobs (id TEXT PRIMARY KEY, client TEXT NOT NULL, priority TEXT NOT NULL, tags TEXT NOT NULL,
                               created REAL NOT NULL, ended REAL, state TEXT NOT NULL, n INTEGER NOT NULL);
            CREATE TABLE items (job TEXT NOT NULL, idx INTEGER NOT NULL, body TEXT NOT NULL, result TEXT,
                                PRIMARY KEY (job, idx)) WITHOUT ROWID;
        """)
        db.execute("INSERT INTO jobs VALUES ('job-old', 'c', 'low', '[\"run\"]', 2.0, NULL, 'running', 4)")
        db.executemany("INSERT INTO items VALUES ('job-old', ?, ?, ?)",
                       [(i, json.dumps(item), verdict(i) if i % 2 else None) for i, item in enumerate(ITEMS)])
    store = JobStore(str(path))
    (job,) = list(store.load())
    assert (job.id, job.priority, job.tags, job.state) == ("job-old", "low", ["run"], "running")
    assert job.bodies == ITEMS
    assert job.texts == [None, verdict(1), None, verdict(3)]
    store.put_verdicts([("job-old", verdict_lines([(0, verdict(0))]))])  # it goes on in the new layout
    assert [t is not None for t in next(iter(store.load())).texts] == [True, True, False, True]
    store.close()
    with sqlite3.connect(path) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"jobs", "bodies", "verdicts"}
