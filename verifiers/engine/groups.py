"""The request-level pass of group-level verifiers (``Verifier.group_level``), run by ``Engine.verify_many``.

Per-item work (reading each response) runs as ordinary items, inline or in the worker pool under their deadlines;
only once every item of the request is in does each group-level verifier see all of its items together, so a
group's verdict never depends on which of its items finished first. Items of other verifiers pass through untouched.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

from verifiers.base import Prepared
from verifiers.context import Context
from verifiers.types import Verdict


async def finish_groups(ctx: Context, prepared: Sequence[Prepared], verdicts: list[Verdict]) -> list[Verdict]:
    """``verdicts`` with those of group-level verifiers replaced by their request-level pass."""
    by_verifier: dict[str, list[int]] = {}
    for i, p in enumerate(prepared):
        if p.verifier.group_level:
            by_verifier.setdefault(p.verifier.name, []).append(i)
    for positions in by_verifier.values():
        verifier = prepared[positions[0]].verifier
        started = time.perf_counter()
        final = await verifier.finish_group(ctx, [prepared[i] for i in positions], [verdicts[i] for i in positions])
        spent_ms = (time.perf_counter() - started) * 1000.0
        for i, verdict in zip(positions, final):
            verdict.elapsed_ms = verdicts[i].elapsed_ms + spent_ms  # the item waited for its group's pass too
            verdicts[i] = verdict
    return verdicts
