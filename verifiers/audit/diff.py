"""Verifier diff: two verifiers' verdicts on the same unlabelled rows, compared as the rewards a trainer would see.

Agreement is on the *reward*: a scored verdict is its score (``ok`` 0, ``no_answer`` and ``rejected`` all read "0"),
and a verdict without a score is its status, a category of its own. A timeout or an error is never read as 0, so
"ours timed out, theirs said 0" is a disagreement to look at, not an agreement by accident.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

SIDES = ("verifier", "against")


def category(result: dict[str, Any]) -> str:
    """``"1"``, ``"0"`` (any score, written with ``:g``) for a scored verdict, else the status name."""
    score = result.get("score")
    return f"{float(score):g}" if isinstance(score, (int, float)) else str(result.get("status"))


def side(name: str, result: dict[str, Any]) -> dict[str, Any]:
    details = result.get("details") or {}
    return {"name": name, "status": result.get("status"), "score": result.get("score"),
            "reason": result.get("reason") or "", "extracted": details.get("extracted"), "details": details}


@dataclass
class DiffTally:
    """Counts over the compared rows; rows that could not be sent at all (no response, not JSON) are skipped."""

    names: tuple[str, str]
    rows: int = 0
    agree: int = 0
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    status_pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def add(self, index: int, row_id: Any, response: str, reference: Any, ours: dict[str, Any],
            theirs: dict[str, Any], tail_chars: int) -> dict[str, Any] | None:
        """Count one row; return its disagreement record, or None when the two verdicts agree."""
        pair = (category(ours), category(theirs))
        self.rows += 1
        self.pairs[pair] += 1
        self.status_pairs[(str(ours.get("status")), str(theirs.get("status")))] += 1
        if pair[0] == pair[1]:
            self.agree += 1
            return None
        return {
            "index": index, "id": row_id, "pair": dict(zip(SIDES, pair)),
            "reference": reference, "response_chars": len(response), "response_tail": response[-tail_chars:],
            "verifier": side(self.names[0], ours), "against": side(self.names[1], theirs),
        }

    def skip(self, index: int, row_id: Any, reason: str) -> None:
        self.skipped.append({"index": index, "id": row_id, "reason": reason})

    @property
    def agreement(self) -> float | None:
        return self.agree / self.rows if self.rows else None

    def agreement_line(self) -> str:
        rate = "n/a" if self.agreement is None else f"{self.agreement:.2%}"
        return (f"agreement: {self.agree}/{self.rows} rows ({rate}) between {self.names[0]} and {self.names[1]}; "
                f"{self.rows - self.agree} disagreement{'' if self.rows - self.agree == 1 else 's'}")

    def summary(self, options: tuple[dict[str, Any], dict[str, Any]], versions: tuple[str, str],
                source: str, cards: int) -> dict[str, Any]:
        def rows_of(counter: Counter[tuple[str, str]], verdicts: bool) -> list[dict[str, Any]]:
            return [{"verifier": a, "against": b, "rows": n, **({"agree": a == b} if verdicts else {})}
                    for (a, b), n in counter.most_common()]

        return {
            "kind": "diff",
            "verifier": {"name": self.names[0], "version": versions[0], "options": options[0]},
            "against": {"name": self.names[1], "version": versions[1], "options": options[1]},
            "input": source,
            "rows": self.rows,
            "agree": self.agree,
            "disagree": self.rows - self.agree,
            "agreement": self.agreement,
            "pairs": rows_of(self.pairs, True),
            "status_pairs": rows_of(self.status_pairs, False),
            "skipped": len(self.skipped),
            "skipped_rows": self.skipped[:100],
            "report_cards": cards,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }


def dump(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, default=str) + "\n"
