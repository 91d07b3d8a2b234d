"""Labelled audit: run a verifier over (response, reference, label) rows and measure how often it is wrong.

Positive = the verifier said correct (ok, score ≥ 0.5). ``no_answer`` and ``rejected`` count as negatives (they
score 0 in training); null-score verdicts (timeout, error, unavailable, invalid_reference) are listed apart and kept
out of the matrix, since they are not the verifier's opinion.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from verifiers.audit.rows import AuditInputError, audit_header, clip, count_statuses, is_positive, run_items
from verifiers.calibration.rates import Counts, wilson
from verifiers.calibration.store import CalibrationStore
from verifiers.conversation import final_text
from verifiers.types import VerifyItem

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.engine import Engine

_TRUE_WORDS = {"1", "true", "yes", "correct", "positive"}
_FALSE_WORDS = {"0", "false", "no", "incorrect", "wrong", "negative"}


@dataclass(frozen=True)
class LabelledRow:
    response: str  # for a trajectory, the text of its final assistant turn
    reference: Any
    label: bool
    id: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None


def _label(value: Any, index: int) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    word = value.strip().lower() if isinstance(value, str) else None
    if word in _TRUE_WORDS or word in _FALSE_WORDS:
        return word in _TRUE_WORDS
    raise AuditInputError(f"label must be true/false or 1/0, got {value!r}", index)


def parse_labelled_rows(rows: list[dict[str, Any]]) -> list[LabelledRow]:
    parsed = []
    for i, row in enumerate(rows):
        unknown = set(row) - {"response", "messages", "tools", "reference", "label", "id"}
        if unknown:
            raise AuditInputError(f"unknown fields {sorted(unknown)} (expected response or messages, tools, "
                                  "reference, label, id)", i)
        messages = row.get("messages")
        if ("response" in row) == (messages is not None):
            raise AuditInputError("give exactly one of response (a string) or messages (a conversation)", i)
        if messages is not None and not (isinstance(messages, list) and messages
                                         and all(isinstance(m, dict) for m in messages)):
            raise AuditInputError("messages must be a non-empty list of chat messages (objects)", i)
        if messages is None and not isinstance(row.get("response"), str):
            raise AuditInputError("response must be a string", i)
        if "label" not in row:
            raise AuditInputError("label is missing", i)
        response = row["response"] if messages is None else final_text(messages)
        parsed.append(LabelledRow(response, row.get("reference"), _label(row["label"], i),
                                  None if row.get("id") is None else str(row["id"]), messages, row.get("tools")))
    if not parsed:
        raise AuditInputError("the audit holds no rows")
    return parsed


async def labelled_audit(
    engine: Engine,
    verifier: str,
    rows: list[dict[str, Any]],
    options: dict[str, Any] | None = None,
    *,
    store: CalibrationStore | None = None,
    source: str = "labelled-audit",
) -> dict[str, Any]:
    """Run the audit; with ``store``, replace this source's counts for the verifier configuration."""
    options = dict(options or {})
    report, key = audit_header("labelled", engine, verifier, options)
    parsed = parse_labelled_rows(rows)
    verdicts = await run_items(engine, [VerifyItem(verifier, r.response, r.reference, options, r.id,
                                                      messages=r.messages, tools=r.tools) for r in parsed])
    tp = fp = tn = fn = 0
    disagreements, unscored = [], []
    for index, (row, v) in enumerate(zip(parsed, verdicts)):
        entry = {"index": index, "id": row.id, "label": row.label, "status": v.status.value, "score": v.score,
                 "reason": v.reason, "response": clip(row.response), "reference": clip(row.reference, 200)}
        if not v.status.scored:
            unscored.append(entry)
            continue
        said = is_positive(v)
        tp += row.label and said
        fn += row.label and not said
        fp += (not row.label) and said
        tn += not row.label and not said
        if said != row.label:
            disagreements.append({**entry, "kind": "false positive" if said else "false negative"})
    counts = Counts(tp, fp, tn, fn)
    report.update(
        n=len(parsed),
        confusion=counts.to_dict(),
        rho0=counts.rho0().to_dict(),
        rho1=counts.rho1().to_dict(),
        accuracy=wilson(tp + tn, counts.total).to_dict(),
        statuses=count_statuses(verdicts),
        disagreements=disagreements,
        unscored=unscored,
        stored=None,
    )
    if store is not None:
        store.set_counts(key, counts, source)
        report["stored"] = {"source": source, "calibration_key": report["calibration_key"]}
    return report
