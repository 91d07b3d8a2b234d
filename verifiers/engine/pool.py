"""A pool of worker processes with a hard deadline per item.

``concurrent.futures.ProcessPoolExecutor`` cannot kill one stuck task, and ``signal.alarm`` does not work outside
the main thread, so each worker is a plain subprocess driven over pipes: an item that overruns its
deadline gets its worker killed and replaced while the other workers keep serving.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.api import run_priority
from sandbox.spawn import kill_and_wait, kill_child, start_process
from verifiers.context import request_source
from verifiers.engine.fairness import FairQueue, WorkerShares
from verifiers.engine.frames import aread_frame, frame
from verifiers.engine.worker_config import WorkerConfig
from verifiers.types import Verdict

log = logging.getLogger(__name__)

# CPU priority of a worker whose check was set aside: about 1.5% of a normal worker's share when the CPU is
# contended (a runaway check barely slows others), full speed when it is not (a legitimately slow check still ends).
_SET_ASIDE_NICE = 19


def _serialise(
        chunk: list[tuple[Job, asyncio.Future[Verdict]]]) -> tuple[bytes, list[tuple[Job, asyncio.Future[Verdict]]]]:
    """The chunk as one pickle for the pipe. A job that cannot be pickled (a reference nested past the recursion
    limit, an object pickle refuses) is answered at once with an error verdict and left out: re-queueing it would
    fail the same way on every worker and jam the pool."""
    def wire(job: Job) -> tuple[Any, ...]:
        return (job.name, job.response, job.reference, job.options, job.messages, job.tools)

    try:
        return pickle.dumps([wire(j) for j, _ in chunk], protocol=pickle.HIGHEST_PROTOCOL), chunk
    except Exception:
        pass
    kept = []
    for job, future in chunk:
        try:
            pickle.dumps(wire(job), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            _resolve(future, Verdict.error(f"the item cannot be sent to a verifier worker ({type(exc).__name__}); "
                                           "is its reference or options nested too deeply?"))
        else:
            kept.append((job, future))
    return pickle.dumps([wire(j) for j, _ in kept], protocol=pickle.HIGHEST_PROTOCOL), kept


def _resolve(future: asyncio.Future[Verdict], verdict: Verdict) -> None:
    if not future.done():  # the caller may have gone away (request cancelled)
        future.set_result(verdict)


class _Worker:
    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc

    async def send_bytes(self, payload: bytes) -> None:
        """One frame of an already pickled payload (see ``_serialise``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame(payload))
        await self.proc.stdin.drain()

    async def recv(self) -> Any:
        assert self.proc.stdout is not None
        return await aread_frame(self.proc.stdout)

    async def kill(self) -> None:
        # reaped and closed while its loop runs: left to the garbage collector the transport would close on a loop
        # that library use (asyncio.run) has already closed, and race the child watcher for the exit status
        await kill_and_wait(self.proc)


@dataclass
class Job:
    name: str
    response: str
    reference: Any
    options: dict[str, Any]
    timeout_s: float
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    source: str = ""
    priority: int = 0  # higher runs first (sandbox.api.run_priority); sources take turns within a priority
    admitted: float = field(default_factory=time.monotonic)  # the deadline counts from here, queueing included

    def remaining(self) -> float:
        return self.timeout_s - (time.monotonic() - self.admitted)


@dataclass
class PoolStats:
    size: int
    busy: int = 0
    waiting: int = 0
    restarts: int = 0
    alive: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class WorkerPool:
    def __init__(
        self,
        size: int,
        modules: Sequence[str],
        *,
        memory_mb: int = 0,
        start_timeout_s: float = 120.0,
        env: dict[str, str] | None = None,
        max_chunk: int = 32,
        slow_after_s: float = 2.0,
        length_tokenizers: dict[str, str] | None = None,
        sql_databases_dir: str = "",
        embedding_models: dict[str, str] | None = None,
    ) -> None:
        self.size = max(1, size)
        self.slow_after_s = slow_after_s
        self.modules = list(modules)
        self.memory_mb = memory_mb
        self.start_timeout_s = start_timeout_s
        self.max_chunk = max_chunk
        self.env = dict(env or {})  # extra environment of the worker processes
        # Told to each worker on its command line, not through its environment.
        self.worker_config = WorkerConfig(memory_mb=memory_mb, length_tokenizers=dict(length_tokenizers or {}),
                                          sql_databases_dir=sql_databases_dir,
                                          embedding_models=dict(embedding_models or {}))
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._all: set[_Worker] = set()
        self._stats = PoolStats(size=self.size)
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._retiring: set[_Worker] = set()  # killed, not yet reaped by their replacement task
        self._aside: set[_Worker] = set()  # running a slow check, already replaced (see _set_aside)
        self._pending: FairQueue[tuple[Job, asyncio.Future[Verdict]]] = FairQueue(lambda entry: entry[0].priority)
        self._shares = WorkerShares(self.size, max_chunk)
        self._wakeup = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._sweep_due = False

    @property
    def stats(self) -> PoolStats:
        self._stats.alive = len(self._all)
        self._stats.waiting = len(self._pending)
        return self._stats

    async def start(self) -> None:
        # return_exceptions: a cancelled start then waits for every spawn to dispose of its half-started worker
        # (plain gather ends at the first cancelled one and the others' children outlive the loop)
        started = await asyncio.gather(*(self._spawn() for _ in range(self.size)), return_exceptions=True)
        failed = next((r for r in started if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed  # the workers that did start are in ``_all``: close() ends them
        for worker in started:
            assert isinstance(worker, _Worker)
            self._idle.put_nowait(worker)

    async def _spawn(self) -> _Worker:
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [*sys.path, env.get("PYTHONPATH", "")]))
        proc = await start_process(
            sys.executable,
            "-m",
            "verifiers.engine.worker",
            *self.worker_config.argv(),
            *self.modules,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        worker = _Worker(proc)
        try:
            hello = await asyncio.wait_for(worker.recv(), self.start_timeout_s)
        except (TimeoutError, asyncio.IncompleteReadError) as exc:
            await worker.kill()
            raise RuntimeError(f"verifier worker failed to start (exit code {proc.returncode})") from exc
        except BaseException:  # cancelled (the pool is closing during a respawn): the child must not outlive it
            await worker.kill()
            raise
        if not (isinstance(hello, tuple) and hello[0] == "ready"):
            await worker.kill()
            raise RuntimeError(f"verifier worker sent {hello!r} instead of ready")
        self._all.add(worker)
        return worker

    def _start_task(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _replace_later(self, dead: _Worker, respawn: bool = True) -> None:
        self._all.discard(dead)
        self._retiring.add(dead)
        kill_child(dead.proc)  # now, not in the task: close() may cancel that task before it runs
        if respawn:
            self._stats.restarts += 1
        self._start_task(self._replace(dead, respawn))

    async def _replace(self, dead: _Worker | None, respawn: bool = True) -> None:
        if dead is not None:
            await dead.kill()
            self._retiring.discard(dead)
            self._aside.discard(dead)
        if not respawn:
            return
        delay = 0.1
        while not self._closed:
            try:
                worker = await self._spawn()
            except Exception:
                log.exception("could not respawn a verifier worker; retrying in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            if self._closed:
                await worker.kill()
            else:
                self._idle.put_nowait(worker)
            return

    async def run(self, name: str, response: str, reference: Any, options: dict[str, Any], timeout_s: float, *,
                  messages: list[dict[str, Any]] | None = None, tools: list[dict[str, Any]] | None = None) -> Verdict:
        return await self.submit(Job(name, response, reference, options, timeout_s, messages, tools))

    async def submit(self, job: Job) -> Verdict:
        """Queue one job. Jobs queued together (a batch, a spec's components, concurrent requests) are coalesced
        into chunks: one pipe round trip per chunk, each job still under its own deadline."""
        if self._closed:
            return Verdict.unavailable("worker pool is shut down")
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        if not job.source:
            job.source = request_source.get()
            job.priority = run_priority.get()
        self._pending.append(job.source, (job, future))
        self._wakeup.set()
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch())
        try:
            return await future
        except asyncio.CancelledError:  # its caller is gone (scope cancelled): ``future`` is cancelled with it
            self._drop_cancelled_soon()
            raise

    def _drop_cancelled_soon(self) -> None:
        """Take the cancelled jobs out of the backlog once the cancelling tick is over: one pass for a whole
        cancelled request, however many of its jobs were queued. A running one is stopped by ``_run_chunk``."""
        if not self._sweep_due:
            self._sweep_due = True
            asyncio.get_running_loop().call_soon(self._drop_cancelled)

    def _drop_cancelled(self) -> None:
        self._sweep_due = False
        dropped = self._pending.drop(lambda entry: entry[1].done())
        if dropped:
            self._stats.extra["cancelled"] = self._stats.extra.get("cancelled", 0) + dropped

    async def _dispatch(self) -> None:
        while not self._closed:
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            worker = await self._idle.get()
            await asyncio.sleep(0)  # let submitters of the same tick join this chunk
            if not self._pending:
                self._idle.put_nowait(worker)
                continue
            source, chunk = self._take_chunk()
            if source is None:  # every waiting source is barred: wait for one of their checks to end
                self._idle.put_nowait(worker)
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            chunk = [(job, fut) for job, fut in chunk if not fut.cancelled()]
            for job, fut in chunk:
                if job.remaining() <= 0:  # waited out its whole deadline in the backlog: never started
                    _resolve(fut, Verdict.timeout(f"check waited past its {job.timeout_s:g}s deadline in the queue"))
            chunk = [(job, fut) for job, fut in chunk if not fut.done()]
            if not chunk:
                self._idle.put_nowait(worker)
                continue
            self._shares.started(source)
            task = asyncio.create_task(self._run_chunk(worker, chunk))
            task.add_done_callback(functools.partial(self._release_source, source))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _may_set_aside(self, job: Job) -> bool:
        return 0 < self.slow_after_s < job.remaining() and len(self._aside) < self.size

    def _set_aside(self, worker: _Worker, chunk: list[tuple[Job, asyncio.Future[Verdict]]],
                   at: int) -> list[tuple[Job, asyncio.Future[Verdict]]]:
        """A check still running after ``slow_after_s`` (real ones take milliseconds) has its worker set aside: the
        worker drops to a low CPU priority and is retired once the check ends or overruns, a fresh worker takes
        its place at once, and the rest of its chunk goes back to the queue. A check that holds its worker until the
        deadline then costs other clients neither a worker nor much CPU. At most ``size`` at a time."""
        self._aside.add(worker)
        self._shares.set_aside(chunk[at][0].source)
        try:
            os.setpriority(os.PRIO_PROCESS, worker.proc.pid, _SET_ASIDE_NICE)
        except OSError:
            pass
        self._stats.restarts += 1
        self._stats.extra["set_aside"] = self._stats.extra.get("set_aside", 0) + 1
        self._start_task(self._replace(None))
        self._requeue(chunk[at + 1:])
        return chunk[:at + 1]

    def _requeue(self, jobs: list[tuple[Job, asyncio.Future[Verdict]]]) -> None:
        """Jobs a worker will not run go back to the front of the queue for another worker."""
        if jobs:
            self._pending.push_front((job.source, (job, fut)) for job, fut in jobs)
            self._wakeup.set()

    def _take_chunk(self) -> tuple[str | None, list[tuple[Job, asyncio.Future[Verdict]]]]:
        """A chunk holds one source's items, spread over all workers and capped so one slow job delays few others,
        under the ``WorkerShares`` policy."""
        return self._pending.take_run(self._shares.sharing(self._pending.sources()))

    def _release_source(self, source: str, _task: asyncio.Task[None]) -> None:
        """A chunk of ``source``'s ended (the done callback of its task)."""
        self._shares.ended(source, still_waiting=source in self._pending.sources())
        self._wakeup.set()  # a barred source may be served again

    async def _run_chunk(self, worker: _Worker, chunk: list[tuple[Job, asyncio.Future[Verdict]]]) -> None:
        data, chunk = _serialise(chunk)
        if not chunk:
            self._idle.put_nowait(worker)
            return
        self._stats.busy += 1
        done = 0
        healthy = aside = False
        try:
            await worker.send_bytes(data)
            started = time.perf_counter()
            while done < len(chunk):
                job, future = chunk[done]
                recv = asyncio.ensure_future(worker.recv())  # never cancelled mid-frame while the worker lives
                try:
                    # the caller's going away (a cancelled future) ends the wait as the answer does
                    if not aside and self._may_set_aside(job):
                        await asyncio.wait({recv, future}, timeout=self.slow_after_s,
                                           return_when=asyncio.FIRST_COMPLETED)
                        if not recv.done() and not future.done():
                            aside = True
                            chunk = self._set_aside(worker, chunk, done)
                    if not recv.done() and not future.done():
                        await asyncio.wait({recv, future}, timeout=max(job.remaining(), 0.0),
                                           return_when=asyncio.FIRST_COMPLETED)
                    overran = not recv.done()
                finally:
                    if not recv.done():
                        recv.cancel()
                if overran and future.cancelled():
                    # nobody waits for this check: its worker is killed (and replaced) at once, not left to run on
                    self._stats.extra["cancelled"] = self._stats.extra.get("cancelled", 0) + 1
                    done += 1
                    break
                if overran:
                    _resolve(future, Verdict.timeout(
                        f"check exceeded its {job.timeout_s:g}s deadline; its worker was killed"))
                    done += 1
                    break
                payload = recv.result()
                verdict = Verdict.from_dict(payload)
                now = time.perf_counter()
                verdict.elapsed_ms = (now - started) * 1000.0
                started = now
                _resolve(future, verdict)
                done += 1
            else:
                healthy = True
        except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
            code = worker.proc.returncode
            _resolve(chunk[done][1], Verdict.error(f"verifier worker died during the check (exit code {code})"))
            done += 1
        finally:
            self._stats.busy -= 1
            if aside:  # its place in the pool was taken when it was set aside: retired, not replaced again
                self._replace_later(worker, respawn=False)
                self._shares.aside_ended(chunk[0][0].source)
            elif healthy:
                self._shares.proved(chunk[0][0].source)
                self._idle.put_nowait(worker)
            else:
                self._replace_later(worker)
            self._requeue(chunk[done:])

    async def settled(self) -> None:
        """Every chunk in flight has ended, every retired worker is reaped and every replacement has joined the
        pool (or the pool closed): ``stats`` then counts the pool at rest."""
        while pending := [t for t in self._tasks if not t.done()]:
            await asyncio.gather(*pending, return_exceptions=True)

    async def close(self) -> None:
        self._closed = True
        if self._dispatcher is not None:
            self._dispatcher.cancel()
        for _, future in self._pending.drain():
            _resolve(future, Verdict.unavailable("worker pool is shut down"))
        for task in list(self._tasks):
            task.cancel()
        workers = [*self._all, *self._retiring]
        self._all.clear()
        self._retiring.clear()
        for worker in workers:
            if worker.proc.stdin is not None:
                worker.proc.stdin.close()
        await asyncio.gather(*(w.kill() for w in workers), return_exceptions=True)
        # Wait for the cancelled tasks too: a respawn in flight kills its half-started worker, so after close no
        # child process (nor the thread that waits for it) is left, which library use relies on.
        while pending := [t for t in self._tasks if not t.done()]:
            await asyncio.gather(*pending, return_exceptions=True)
