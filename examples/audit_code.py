"""Ready probe audit of the built-in ``code`` verifier on HumanEval and MBPP (from ../shared/data), through the real
sandbox.

References are the data sets' own tests, in the shapes the code verifier takes: HumanEval ``{"test", "entry_point",
"prompt"}``, MBPP ``{"test_list", "test_setup_code"}``. Every harness attack family (exit early, always-equal objects,
patched builtins, shadowed names, fake verdict lines, reading the tests, killing the harness) is generated against
each reference's own functions under test, builtins, modules and prompt helpers; the text families run too. A probe is
a false positive when it scores >= 0.5.

Run: python examples/audit_code.py [--out examples/audits/code] [--refs 40] [--per-family 4]
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reward_service.resources.runtime import Runtime  # noqa: E402
from reward_service.settings import Settings  # noqa: E402
from verifiers.audit import probe_audit, write_report  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "code"


def references(data: Path, per_source: int, rng: random.Random) -> list[dict[str, Any]]:
    """``per_source`` HumanEval and MBPP tasks (all when 0) as probe rows."""
    with gzip.open(data / "HumanEval.jsonl.gz", "rt") as fh:
        humaneval = [json.loads(line) for line in fh]
    mbpp = [json.loads(line) for line in (data / "mbpp.jsonl").read_text().splitlines() if line.strip()]
    pick = (lambda rows: rng.sample(rows, per_source)) if per_source else (lambda rows: rows)
    rows = [{"id": t["task_id"], "reference": {"test": t["test"], "entry_point": t["entry_point"], "prompt": t["prompt"]}}
            for t in pick(humaneval)]
    rows += [{"id": f"mbpp/{t['task_id']}", "reference": {"test_list": t["test_list"],
                                                          "test_setup_code": t["test_setup_code"]}}
             for t in pick(mbpp)]
    return rows


async def audit(rows: list[dict[str, Any]], *, per_family: int | None, seed: int,
                families: list[str] | None = None) -> dict[str, Any]:
    scratch = tempfile.TemporaryDirectory()  # the runtime opens a calibration store; this audit does not write one
    settings = Settings(workers=0, calibration_db=str(Path(scratch.name) / "calibration.sqlite3"))
    try:
        async with Runtime.open(settings) as runtime:
            return await probe_audit(runtime.engine, "code", rows, {}, families=families, per_family=per_family,
                                     seed=seed)
    finally:
        scratch.cleanup()


def main(out: Path, refs: int, per_family: int | None, seed: int) -> None:
    rows = references(DATA, refs, random.Random(seed))
    report = asyncio.run(audit(rows, per_family=per_family, seed=seed))
    json_path, _ = write_report(report, out)
    print(f"wrote {json_path.parent}: {report['n_references']} references, {report['n_probes']} probes, "
          f"statuses {report['statuses']}")
    for family, s in report["families"].items():
        print(f"{family:>24}: FP {s['fp']}/{s['n']} (unscored {s['unscored']})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "examples" / "audits" / "code")
    parser.add_argument("--refs", type=int, default=40, help="References per data set (0: all).")
    parser.add_argument("--per-family", type=int, default=4, help="Variants sampled per family and reference (0: all).")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.out, args.refs, args.per_family or None, args.seed)
