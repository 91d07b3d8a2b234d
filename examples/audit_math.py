"""Ready audit of the built-in ``math`` verifier on MATH-500 and GSM8K (from ../shared/data).

Labelled set, built from the data alone (no model outputs needed):
- positives: each problem's reference solution as the response (MATH-500 ``solution`` with its \\boxed answer,
  GSM8K ``answer`` ending in ``#### N``) against the problem's own answer;
- negatives: the solution of another problem, drawn at random among those whose answer text differs, against this
  problem's answer (a few may be equal in value though not in text: the report lists every disagreement to check).
Probe set: the same references through every text attack family.

Run: python examples/audit_math.py [--out examples/audits/math] [--probe-refs 150] [--per-family 3]
"""
from __future__ import annotations

import argparse
import asyncio
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
from verifiers.audit import labelled_audit, probe_audit, write_report  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "math"


def load() -> list[dict[str, Any]]:
    """(source, id, solution text, reference answer) for both data sets."""
    out = []
    for line in (DATA / "math500.test.jsonl").read_text().splitlines():
        r = json.loads(line)
        out.append({"source": "math500", "id": r["unique_id"], "solution": r["solution"], "answer": r["answer"]})
    for line in (DATA / "gsm8k.test.jsonl").read_text().splitlines():
        r = json.loads(line)
        out.append({"source": "gsm8k", "id": f"gsm8k/{r['idx']}", "solution": r["answer"],
                    "answer": r["answer"].rsplit("####", 1)[1].strip().replace(",", "")})
    return out


def labelled_rows(problems: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for p in problems:
        rows.append({"id": f"{p['id']}:gold", "response": p["solution"], "reference": p["answer"], "label": True})
        while True:
            other = rng.choice(problems)
            if other["answer"].replace(" ", "") != p["answer"].replace(" ", ""):
                break
        rows.append({"id": f"{p['id']}:cross:{other['id']}", "response": other["solution"], "reference": p["answer"],
                     "label": False})
    return rows


async def main(out: Path, probe_refs: int, per_family: int, seed: int) -> None:
    rng = random.Random(seed)
    problems = load()
    rows = labelled_rows(problems, rng)
    probe_rows = [{"reference": p["answer"]} for source in ("math500", "gsm8k")
                  for p in rng.sample([q for q in problems if q["source"] == source], probe_refs)]
    scratch = tempfile.TemporaryDirectory()  # the runtime opens a calibration store; this audit does not write one
    settings = Settings(workers=0, calibration_db=str(Path(scratch.name) / "calibration.sqlite3"))
    async with Runtime.open(settings) as runtime:
        labelled = await labelled_audit(runtime.engine, "math", rows, {}, source="math500+gsm8k")
        probes = await probe_audit(runtime.engine, "math", probe_rows, {}, per_family=per_family, seed=seed)
    scratch.cleanup()
    for name, report in (("labelled", labelled), ("probes", probes)):
        json_path, _ = write_report(report, out / name)
        print(f"wrote {json_path.parent}")
    c = labelled["confusion"]
    print(f"labelled: {len(rows)} rows, TP {c['tp']} FP {c['fp']} TN {c['tn']} FN {c['fn']}, "
          f"FP rate {labelled['rho0']['value']:.4f} [{labelled['rho0']['low']:.4f}, {labelled['rho0']['high']:.4f}], "
          f"FN rate {labelled['rho1']['value']:.4f} [{labelled['rho1']['low']:.4f}, {labelled['rho1']['high']:.4f}]")
    for family, s in probes["families"].items():
        print(f"probes {family:>18}: FP {s['fp']}/{s['n']} (unscored {s['unscored']})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "examples" / "audits" / "math")
    parser.add_argument("--probe-refs", type=int, default=150, help="References sampled per data set for probes.")
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(main(args.out, args.probe_refs, args.per_family, args.seed))
