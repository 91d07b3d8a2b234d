"""Groups of real responses to one problem (ProcessBench), as the consensus verifier sees a GRPO group."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any


def _processbench_groups(shared_data: Path, min_responses: int) -> list[list[dict[str, Any]]]:
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in (shared_data / "math" / "processbench_answers.jsonl").read_text().splitlines():
        row = json.loads(line)
        by_problem[row["problem"]].append(row)
    return [rows for rows in by_problem.values() if len(rows) >= min_responses]
