"""A pool of worker processes with a hard deadline per item.

``concurrent.futures.ProcessPoolExecutor`` cannot kill one stuck task, and ``signal.alarm`` does not work outside
the main thread (field notes §2), so each worker is a plain subprocess driven over pipes: an item that overruns its
deadline gets its worker killed and replaced while the other workers keep serving.
"""
from __future__ import annotations

import asyncio
import logging
import os
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from verifiers._frames import HEADER as _HEADER
from verifiers.types import Verdict

log = logging.getLogger("reward_service.pool")


class _Worker:
    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc

    async def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.write(_HEADER.pack(len(data)) + data)
        await self.proc.stdin.drain()

    async def recv(self) -> Any:
        assert self.proc.stdout is not None
        header = await self.proc.stdout.readexactly(_HEADER.size)
        (size,) = _HEADER.unpack(header)
        return pickle.loads(await self.proc.stdout.readexactly(size))

    async def kill(self) -> None:
        if self.proc.returncode is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
        await self.proc.wait()


@dataclass
class Job:
    name: str
    response: str
    reference: Any
    options: dict[str, Any]
    timeout_s: float


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
    ) -> None:
        self.size = max(1, size)
        self.modules = list(modules)
        self.memory_mb = memory_mb
        self.start_timeout_s = start_timeout_s
        self.max_chunk = max_chunk
        self.env = dict(env or {})  # worker-side configuration, e.g. configured tokenizers
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._all: set[_Worker] = set()
        self._stats = PoolStats(size=self.size)
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def stats(self) -> PoolStats:
        self._stats.alive = len(self._all)
        return self._stats

    async def start(self) -> None:
        workers = await asyncio.gather(*(self._spawn() for _ in range(self.size)))
        for worker in workers:
            self._idle.put_nowait(worker)

    async def _spawn(self) -> _Worker:
        env = {**os.environ, **self.env}
        env["REWARD_SERVICE_WORKER_MEMORY_MB"] = str(self.memory_mb)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [*sys.path, env.get("PYTHONPATH", "")]))
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "verifiers._worker",
            *self.modules,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        worker = _Worker(proc)
        try:
            hello = await asyncio.wait_for(worker.recv(), self.start_timeout_s)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            await worker.kill()
            raise RuntimeError(f"verifier worker failed to start (exit code {proc.returncode})") from exc
        if not (isinstance(hello, tuple) and hello[0] == "ready"):
            await worker.kill()
            raise RuntimeError(f"verifier worker sent {hello!r} instead of ready")
        self._all.add(worker)
        return worker

    def _replace_later(self, dead: _Worker) -> None:
        self._all.discard(dead)
        self._stats.restarts += 1
        task = asyncio.create_task(self._replace(dead))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self, dead: _Worker) -> None:
        await dead.kill()
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

    async def run(self, name: str, response: str, reference: Any, options: dict[str, Any], timeout_s: float) -> Verdict:
        return (await self.run_batch([Job(name, response, reference, options, timeout_s)]))[0]

    async def run_batch(self, jobs: Sequence[Job]) -> list[Verdict]:
        """Run jobs in chunks (one pipe round trip per chunk, not per job), each job under its own deadline."""
        results: list[Verdict | None] = [None] * len(jobs)
        if self._closed:
            return [Verdict.unavailable("worker pool is shut down") for _ in jobs]
        # Enough chunks to keep every worker busy and balance uneven costs; small enough to amortise the IPC.
        size = max(1, min(self.max_chunk, -(-len(jobs) // (self.size * 4))))
        indices = list(range(len(jobs)))
        chunks = [indices[i : i + size] for i in range(0, len(indices), size)]
        await asyncio.gather(*(self._run_chunk(jobs, chunk, results) for chunk in chunks))
        return [r if r is not None else Verdict.error("job lost in the worker pool") for r in results]

    async def _run_chunk(self, jobs: Sequence[Job], chunk: list[int], results: list[Verdict | None]) -> None:
        while chunk:
            self._stats.waiting += 1
            try:
                worker = await self._idle.get()
            finally:
                self._stats.waiting -= 1
            self._stats.busy += 1
            done = 0
            healthy = False
            try:
                await worker.send([(jobs[i].name, jobs[i].response, jobs[i].reference, jobs[i].options) for i in chunk])
                started = time.perf_counter()
                for i in chunk:
                    job = jobs[i]
                    try:
                        payload = await asyncio.wait_for(worker.recv(), job.timeout_s)
                    except asyncio.TimeoutError:
                        results[i] = Verdict.timeout(
                            f"check exceeded its {job.timeout_s:g}s deadline; its worker was killed"
                        )
                        done += 1
                        break
                    verdict = Verdict.from_dict(payload)
                    now = time.perf_counter()
                    verdict.elapsed_ms = (now - started) * 1000.0
                    started = now
                    results[i] = verdict
                    done += 1
                else:
                    healthy = True
            except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
                code = worker.proc.returncode
                results[chunk[done]] = Verdict.error(f"verifier worker died during the check (exit code {code})")
                done += 1
            finally:
                self._stats.busy -= 1
                if healthy:
                    self._idle.put_nowait(worker)
                else:
                    self._replace_later(worker)
            chunk = chunk[done:]  # after a kill, the rest of the chunk goes to another worker

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        workers = list(self._all)
        self._all.clear()
        for worker in workers:
            if worker.proc.stdin is not None:
                worker.proc.stdin.close()
        await asyncio.gather(*(w.kill() for w in workers), return_exceptions=True)
