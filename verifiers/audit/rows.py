"""Reading audit inputs (JSONL rows) and running a batch of items through the engine."""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifiers.types import Verdict, VerifyItem

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.engine import Engine

CHUNK = 256  # items in flight at once: bounds memory and keeps the worker pool's queue short


class AuditInputError(ValueError):
    """A malformed audit input; ``index`` is the 0-based row (None for the audit as a whole)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message if index is None else f"row {index}: {message}")
        self.index = index


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise AuditInputError(f"line {number + 1} is not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise AuditInputError(f"line {number + 1} is not a JSON object")
            rows.append(row)
    if not rows:
        raise AuditInputError(f"{path} holds no rows")
    return rows


async def run_items(engine: Engine, items: Sequence[VerifyItem]) -> list[Verdict]:
    verdicts: list[Verdict] = []
    for start in range(0, len(items), CHUNK):
        verdicts.extend(await engine.verify_many(items[start:start + CHUNK]))
    return verdicts


def is_positive(v: Verdict) -> bool:
    """The verifier said "correct": an ok verdict scoring at least 0.5."""
    return v.status.value == "ok" and (v.score or 0.0) >= 0.5


def clip(text: Any, limit: int = 400) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text)} chars]"


def audit_header(kind: str, engine: Engine, verifier: str, options: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The fields every report starts with, and the configuration key. Validates the verifier name and options
    (raises AuditInputError)."""
    from pydantic import ValidationError

    from verifiers.calibration.key import config_key
    from verifiers.engine.registry import UnknownVerifier

    if {"correction", "appeal", "noise_rates"} & set(options):
        raise AuditInputError("an audit measures the raw verifier: drop correction/appeal/noise_rates from options")
    try:
        prepared = engine.prepare(VerifyItem(verifier, "", None, dict(options)))
    except UnknownVerifier as exc:
        raise AuditInputError(str(exc)) from None
    except ValidationError as exc:
        raise AuditInputError(f"options invalid for {verifier!r}: {exc.errors()[0]['msg']}") from None
    key = config_key(prepared.verifier, prepared.options)
    return {
        "kind": kind,
        "verifier": verifier,
        "version": prepared.verifier.version,
        "options": options,
        "calibration_key": str(key),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }, key


def count_statuses(verdicts: Iterable[Verdict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in verdicts:
        out[v.status.value] = out.get(v.status.value, 0) + 1
    return out
