"""Batch scoring across a Ray cluster with ``ray.data``: each actor holds an embedded runtime (engine + worker
pool) and scores whole chunks; the driver streams the input, skips rows already in the journal, and commits the
scored chunks in input order, so the run stays resumable exactly like the single-host path.

Rows travel as JSON text (one string per chunk): rollout columns are often of mixed types (a reference that is a
string in one row and an object in another), which Arrow's schema inference refuses.
"""
from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from reward_service.batch.rows import RowSpec, UnreadableRow, group_chunks

_UNREADABLE = "__reward_service_unreadable__"


def encode_chunk(rows: list[dict[str, Any]]) -> str:
    wire = [{_UNREADABLE: r.problem, **r} if isinstance(r, UnreadableRow) else r for r in rows]
    return json.dumps(wire, ensure_ascii=False, default=str)


def decode_chunk(text: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in json.loads(text):
        if _UNREADABLE in r:
            row = UnreadableRow(r.pop(_UNREADABLE))
            row.update(r)
            rows.append(row)
        else:
            rows.append(r)
    return rows


class ChunkScorer:
    """A Ray Data actor (callable class): one runtime per actor, opened once, used for every chunk it gets."""

    def __init__(self, spec: dict[str, Any], config: str | None, workers: int | None) -> None:
        from reward_service.batch.scorers import EmbeddedScorer
        from reward_service.resources.runtime import Runtime
        from reward_service.settings import load_settings

        self.spec = RowSpec(**spec)
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="runtime-loop").start()
        settings = load_settings(config, workers=workers)
        self._runtime_cm = Runtime.open(settings)
        runtime = self._call(self._runtime_cm.__aenter__())
        self.scorer = EmbeddedScorer(runtime.engine, settings.limits)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        from reward_service.batch.rows import ascore_batch

        out = []
        for text in batch["chunk"]:
            scored = self._call(ascore_batch(decode_chunk(str(text)), self.spec, self.scorer))
            out.append(json.dumps(scored, ensure_ascii=False, default=str))
        return {"chunk": out}

    def __del__(self) -> None:
        try:
            self._call(self._runtime_cm.__aexit__(None, None, None))
            self.loop.call_soon_threadsafe(self.loop.stop)
        except Exception:
            pass


def _windows(rows: Iterator[dict[str, Any]], chunk_size: int, window_chunks: int,
             group_field: str | None = None) -> Iterator[list[str]]:
    """Encoded chunks (never cutting a group), a window at a time, so the driver never holds the whole input."""
    window: list[str] = []
    for chunk in group_chunks(rows, chunk_size, group_field):
        window.append(encode_chunk(chunk))
        if len(window) >= window_chunks:
            yield window
            window = []
    if window:
        yield window


def run_on_ray(
    rows: Iterator[dict[str, Any]],
    spec: RowSpec,
    commit: Callable[[list[dict[str, Any]]], None],
    *,
    address: str | None,
    actors: int,
    workers: int | None,
    config: str | None,
    chunk_size: int,
    window_chunks: int = 512,
) -> None:
    """Score ``rows`` on Ray; ``commit`` receives scored chunks in input order."""
    import ray
    import ray.data

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    for window in _windows(rows, chunk_size, window_chunks, spec.group_field):
        ds = ray.data.from_items([{"chunk": text} for text in window]).map_batches(
            ChunkScorer,
            batch_size=1,
            concurrency=actors,
            fn_constructor_kwargs={"spec": asdict(spec), "config": config, "workers": workers},
            batch_format="default",
        )
        for batch in ds.iter_batches(batch_size=1, batch_format="default"):
            for text in batch["chunk"]:
                commit(json.loads(str(text)))
