"""Jobs: a ``/v1/verify`` batch accepted at once and scored in the background, its verdicts served as they are
decided, cancelled as a whole, kept for a TTL after it ends and, with the store on, across restarts.

A job runs as one task through the same engine as ``/v1/verify`` (``Engine.verify_many``) under the job's own
cancellation scope and turns: its id is the source that takes turns in the worker pool, the sandbox's slots and the
judges' rate gates, its client's address the client, and its priority is asked of each of them before the turns
(``sandbox.api.run_priority``). Each verdict is recorded as it is decided (``JobRecord.decided``); every
``FLUSH_S`` what was decided since the last tick is written to the store in one transaction and only then handed to
the readers waiting for it (long-polls and result streams), in one write per stream: a verdict a client has seen is
in the store, and a tick costs the same whether it carries one verdict or a thousand.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from reward_service.errors import ApiError
from reward_service.jobs.store import JobStore, StoredJob, verdict_lines
from reward_service.schemas.verify import json_text
from reward_service.settings import JobsSettings
from sandbox.api import run_client, run_priority, run_source
from verifiers.base import Prepared
from verifiers.context import request_source
from verifiers.engine import Engine
from verifiers.engine.cancel import CancelScope
from verifiers.types import Verdict

log = logging.getLogger(__name__)

PRIORITIES = {"high": 1, "normal": 0, "low": -1}
DELETED = "the job was deleted"
SHUTDOWN = "the server shut down before the job ended"
FLUSH_S = 0.05  # how long a decided verdict may wait before it is written to the store and streamed
_ID = re.compile(r"^job-([0-9a-f]{8})-[0-9a-f]{24}$")

ToResult = Callable[[Prepared, Verdict], dict[str, Any]]
Prepare = Callable[[list[dict[str, Any]]], list[Prepared]]


def groups_of(bodies: list[dict[str, Any]]) -> list[str | None] | None:
    groups = [b.get("group") if isinstance(b, dict) else None for b in bodies]
    return groups if any(g is not None for g in groups) else None


@dataclass
class JobsSnapshot:
    jobs: dict[str, int]  # held, by state
    queued_items: dict[str, int]  # undecided items of unfinished jobs, by priority
    held_items: int
    submitted: dict[str, int]  # jobs accepted since the start, by priority
    store_bytes: int | None  # None: no store
    store_writes: int
    store_verdicts: int


@dataclass(eq=False)  # a job is itself: hashed by identity
class JobRecord:
    id: str
    client: str
    priority: str
    tags: list[str]
    created: float
    # Each item's verdict as JSON text once decided: what the store, the streams and GET /v1/jobs/{id} hand out.
    # Text, not dicts: a held job is then a few objects the garbage collector does not walk, where thousands of dicts
    # held for the TTL would make every full collection of the server slower.
    texts: list[str | None]
    groups_of: list[str | None] | None = None  # the items' groups, when any item has one
    statuses: Counter[str] = field(default_factory=Counter)  # the verdicts so far, per status
    order: list[int] = field(default_factory=list)  # indices in the order their verdicts were decided
    written: int = 0  # how many of ``order`` are in the store (all of them once flushed, with or without a store)
    state: str = "queued"
    ended: float | None = None
    scope: CancelScope = field(default_factory=CancelScope)
    task: asyncio.Task[None] | None = None
    groups: dict[str, Any] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _waiting: int = 0  # readers in ``changed``: a verdict nobody waits for wakes nobody

    @property
    def finished(self) -> bool:
        return self.state in ("done", "cancelled", "lost")

    @property
    def unfinished(self) -> int:
        return len(self.texts) - len(self.order)

    def decided(self, index: int, result: dict[str, Any]) -> bool:
        """Record one verdict (once: a second for the same item is ignored). Readers see it once it is written
        (``JobManager.flush``)."""
        if self.texts[index] is not None:
            return False
        self.texts[index] = json_text(result)
        self.statuses[result["status"]] += 1
        self.order.append(index)
        if self.state == "queued":
            self.state = "running"
        return True

    def wake(self) -> None:
        if self._waiting:
            event, self._changed = self._changed, asyncio.Event()
            event.set()

    async def changed(self, within_s: float) -> None:
        """Wait until something is decided (or the job ends), at most ``within_s`` seconds."""
        self._waiting += 1
        try:
            await asyncio.wait_for(self._changed.wait(), within_s)
        except TimeoutError:
            pass
        finally:
            self._waiting -= 1

    def counts(self) -> dict[str, Any]:
        return {"total": len(self.texts), "done": len(self.order), "statuses": dict(self.statuses)}

    def scores(self) -> list[float | None]:
        """Each item's score (None while undecided or null), read back from its text."""
        return [json.loads(t)["score"] if t is not None else None for t in self.texts]


class JobManager:
    """The jobs of one server: accepted, running and finished (until their TTL), with their limits."""

    def __init__(self, settings: JobsSettings, prepare: Prepare, to_result: ToResult,
                 finish: Callable[[JobRecord], None]) -> None:
        self.settings = settings
        self.prepare = prepare
        self.to_result = to_result
        self.finish = finish  # the job's group statistics, once every verdict is in
        self.boot = secrets.token_hex(4)  # names this run of the server in the ids it hands out
        self.jobs: dict[str, JobRecord] = {}
        self.store: JobStore | None = None
        self.engine: Engine | None = None
        self._unwritten: set[JobRecord] = set()  # jobs with verdicts not yet written
        self._flush_handle: asyncio.TimerHandle | None = None
        self._janitor: asyncio.Task[None] | None = None
        self.closing = False  # the server is shutting down: readers are let go (they resume after the restart)
        self.queued_items = 0  # items of unfinished jobs still without a verdict
        self.held_items = 0  # items of every job held (unfinished, or finished within the TTL)
        self.submitted: Counter[str] = Counter()  # jobs accepted since the start, by priority
        self.running: Counter[str] = Counter()  # unfinished jobs per client (counted, not searched for, per submit)

    # --- life cycle -----------------------------------------------------------------------------------------

    async def start(self, engine: Engine) -> None:
        """Open the store (when on), read back the jobs that have not expired, and go on with the unfinished."""
        self.engine = engine
        path = self.settings.store.strip()
        if path and path.lower() != "off":
            self.store = JobStore(path)
            now = time.time()
            expired = []
            for stored in self.store.load():
                if stored.ended is not None and stored.ended + self.settings.ttl_s < now:
                    expired.append(stored.id)
                    continue
                self._resume(stored)
            if expired:
                self.store.delete(expired)
        self._janitor = asyncio.create_task(self._expire_loop())

    def let_readers_go(self) -> None:
        """Shutdown: end every result stream and long-poll now, so open streams do not hold the server up; a
        client reads on with ``?after=`` once the server is back."""
        self.closing = True
        for job in self.jobs.values():
            job.wake()

    async def close(self) -> None:
        """Stop every running job. With the store on they stay unfinished there and go on after a restart; their
        verdicts decided so far are written first."""
        self.let_readers_go()
        if self._janitor is not None:
            self._janitor.cancel()
        running = [job for job in self.jobs.values() if job.task is not None and not job.task.done()]
        for job in running:
            job.scope.cancel(SHUTDOWN)
        for job in running:
            assert job.task is not None
            await asyncio.gather(job.task, return_exceptions=True)
        self.flush()
        if self.store is not None:
            self.store.close()

    # --- accepting ------------------------------------------------------------------------------------------

    def submit(self, client: str, priority: str, tags: list[str], bodies: list[dict[str, Any]],
               prepared: list[Prepared], sent: bytes) -> JobRecord:
        """Accept a job whose items are validated and prepared (429/413 past a limit); ``sent``: the request body
        whose ``items`` are ``bodies``, what the store keeps."""
        s = self.settings
        n = len(bodies)
        active = self.running.get(client, 0)
        if active >= s.max_jobs_per_client:
            raise ApiError(429, f"client {client or '?'} has {active} unfinished jobs, the most a client may have "
                                f"(jobs_max_jobs_per_client); wait for one to end or delete one",
                           headers={"Retry-After": "1"})
        if n > s.max_queued_items:
            raise ApiError(413, f"a job of {n} items exceeds the jobs' queue of {s.max_queued_items} items "
                                "(jobs_max_queued_items); split it", loc=["items"])
        if self.queued_items + n > s.max_queued_items:
            raise ApiError(429, f"the jobs' queue holds {self.queued_items} unfinished items of "
                                f"{s.max_queued_items} (jobs_max_queued_items); retry later",
                           headers={"Retry-After": "1"})
        if self.held_items + n > s.max_stored_results:
            raise ApiError(429, f"the job store holds {self.held_items} items of {s.max_stored_results} "
                                "(jobs_max_stored_results) until their jobs expire (jobs_ttl_s) or are deleted",
                           headers={"Retry-After": str(max(1, int(s.ttl_s)))})
        job = JobRecord(f"job-{self.boot}-{secrets.token_hex(12)}", client, priority, list(tags), time.time(),
                        [None] * n, groups_of(bodies))
        if self.store is not None:
            self.store.add(StoredJob(job.id, client, priority, job.tags, job.created, None, "queued", bodies,
                                     job.texts), sent)
        self._admit(job, list(range(n)), prepared)
        self.submitted[priority] += 1
        return job

    def _admit(self, job: JobRecord, todo: list[int], prepared: list[Prepared]) -> None:
        self.jobs[job.id] = job
        self.running[job.client] += 1
        self.queued_items += len(todo)
        self.held_items += len(job.texts)
        job.task = asyncio.create_task(self._run(job, todo, prepared), name=f"job {job.id}")

    def _resume(self, stored: StoredJob) -> None:
        """A job read back from the store: finished verdicts served as they were, the rest scored again."""
        job = JobRecord(stored.id, stored.client, stored.priority, stored.tags, stored.created,
                        [None] * len(stored.bodies), groups_of(stored.bodies), ended=stored.ended)
        for i, text in enumerate(stored.texts):
            if text is not None:
                job.decided(i, json.loads(text))
                job.texts[i] = text  # served as it was stored
        job.written = len(job.order)
        todo = [i for i, t in enumerate(job.texts) if t is None]
        if not todo:
            job.state = stored.state if stored.state in ("done", "cancelled") else "done"
            self.jobs[job.id] = job
            self.held_items += len(job.texts)
            self.finish(job)
            return
        job.state = "running" if job.order else "queued"
        try:
            prepared = self.prepare([stored.bodies[i] for i in todo])
        except Exception as exc:  # a verifier this server no longer has: each item says so
            reason = f"the job's items cannot be prepared on this server after its restart: {exc}"
            for i in todo:
                if job.decided(i, self.to_result(self.prepare_failed(stored.bodies[i]), Verdict.error(reason))):
                    self._write(job)
            self.jobs[job.id] = job
            self.held_items += len(job.texts)
            self._ended(job, "done")
            return
        log.info("resuming job %s: %d of %d items left", job.id, len(todo), len(job.texts))
        self._admit(job, todo, prepared)

    @staticmethod
    def prepare_failed(body: dict[str, Any]) -> Prepared:
        from verifiers.base import BaseOptions, Verifier
        from verifiers.types import VerifyItem

        class _Gone(Verifier):
            name = str(body.get("verifier", ""))

        item = VerifyItem(verifier=_Gone.name, response="", id=body.get("id"))
        return Prepared(item, _Gone(), BaseOptions())

    # --- running --------------------------------------------------------------------------------------------

    async def _run(self, job: JobRecord, todo: list[int], prepared: list[Prepared]) -> None:
        assert self.engine is not None
        request_source.set(job.id)  # the job takes turns as one source, of its client, at its priority
        run_source.set(job.id)
        run_client.set(job.client)
        run_priority.set(PRIORITIES.get(job.priority, 0))

        def decided(k: int, verdict: Verdict) -> None:
            if job.scope.cancelled and job.scope.reason == SHUTDOWN and self.store is not None:
                return  # stopped by a shutdown: scored again after the restart, not answered ``cancelled``
            result = self.to_result(prepared[k], verdict)
            if job.decided(todo[k], result):
                self.queued_items -= 1
                self._write(job)

        try:
            await self.engine.verify_many(prepared, job.scope, on_verdict=decided)
        except Exception:
            log.exception("job %s failed", job.id)
            for k, i in enumerate(todo):
                if job.texts[i] is None:
                    decided(k, Verdict.error("the job failed inside the server; see its log"))
        if job.scope.cancelled and job.scope.reason == SHUTDOWN and self.store is not None:
            return
        self._ended(job, "cancelled" if job.scope.cancelled else "done")

    def _ended(self, job: JobRecord, state: str) -> None:
        if job.task is not None:  # admitted (``_admit``): no longer running
            self.running[job.client] -= 1
            if self.running[job.client] <= 0:
                del self.running[job.client]
        job.state = state
        job.ended = time.time()
        self.finish(job)
        self.flush()
        if self.store is not None:
            self.store.set_state(job.id, state, job.ended)
        job.wake()

    def _write(self, job: JobRecord) -> None:
        """``job`` has a verdict to write: written (and shown to its readers) within ``FLUSH_S``."""
        self._unwritten.add(job)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(FLUSH_S, self.flush)

    def flush(self) -> None:
        """Write the verdicts decided since the last flush, in one transaction, and hand them to the jobs' readers:
        one commit and one write to each result stream per tick, however many verdicts it carries."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        jobs, self._unwritten = self._unwritten, set()
        if not jobs:
            return
        if self.store is not None:
            self.store.put_verdicts(
                [(job.id, verdict_lines((i, text) for i in job.order[job.written:] if (text := job.texts[i])))
                 for job in jobs], sum(len(job.order) - job.written for job in jobs))
        for job in jobs:
            job.written = len(job.order)
            job.wake()

    # --- reading and cancelling -----------------------------------------------------------------------------

    def get(self, job_id: str) -> JobRecord | str:
        """The job, or why there is none: "lost" (handed out by an earlier run of a server without a store) or
        "unknown"."""
        job = self.jobs.get(job_id)
        if job is not None:
            return job
        match = _ID.match(job_id)
        if match is not None and match.group(1) != self.boot and self.store is None:
            return "lost"
        return "unknown"

    def cancel(self, job: JobRecord, reason: str = DELETED) -> bool:
        if job.finished:
            return False
        job.scope.cancel(reason)
        return True

    def cancel_tagged(self, tag: str) -> list[str]:
        hit = [job for job in self.jobs.values() if tag in job.tags and not job.finished]
        for job in hit:
            job.scope.cancel(DELETED)
        return [job.id for job in hit]

    async def wait(self, job: JobRecord, within_s: float) -> None:
        """Until the job ends, at most ``within_s`` seconds."""
        deadline = time.monotonic() + within_s
        while not job.finished and not self.closing and (left := deadline - time.monotonic()) > 0:
            await job.changed(left)

    async def stream(self, job: JobRecord, after: int = 0) -> AsyncIterator[list[tuple[int, str]]]:
        """The verdicts as they are decided, from the ``after``-th decided on, until the job ends: each time, every
        (index, verdict as JSON text) decided since the last. What it hands out is in the store first, so a verdict
        a client has seen is never decided again after a restart."""
        seen = max(0, after)
        while True:
            if seen < job.written:
                fresh = job.order[seen:job.written]
                seen = job.written
                yield [(index, text) for index in fresh if (text := job.texts[index]) is not None]
            if job.finished or self.closing:
                return
            await job.changed(30.0)

    def snapshot(self) -> JobsSnapshot:
        """What /metrics reports, read when it is scraped."""
        states: Counter[str] = Counter(job.state for job in self.jobs.values())
        queued: Counter[str] = Counter()
        for job in self.jobs.values():
            if not job.finished:
                queued[job.priority] += job.unfinished
        store = self.store
        return JobsSnapshot(
            jobs={state: states.get(state, 0) for state in ("queued", "running", "done", "cancelled")},
            queued_items={priority: queued.get(priority, 0) for priority in PRIORITIES},
            held_items=self.held_items, submitted=dict(self.submitted),
            store_bytes=store.size_bytes() if store is not None else None,
            store_writes=store.writes if store is not None else 0,
            store_verdicts=store.verdicts_written if store is not None else 0)

    # --- expiry ---------------------------------------------------------------------------------------------

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(min(30.0, max(0.5, self.settings.ttl_s / 4)))
            self.expire()

    def expire(self) -> list[str]:
        now = time.time()
        gone = [job for job in self.jobs.values()
                if job.finished and job.ended is not None and job.ended + self.settings.ttl_s <= now]
        for job in gone:
            del self.jobs[job.id]
            self.held_items -= len(job.texts)
        if gone and self.store is not None:
            self.flush()
            self.store.delete(job.id for job in gone)
        return [job.id for job in gone]
