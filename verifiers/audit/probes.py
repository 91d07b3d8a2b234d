"""Probe audit: generate attacks from references and report the false-positive rate per attack family."""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from verifiers.audit.attacks import FAMILIES, Target, default_families, entry_point, gold_text, wrong_answers
from verifiers.audit.harness_attacks import HARNESS_FAMILIES, code_facts
from verifiers.audit.rows import AuditInputError, audit_header, clip, count_statuses, is_positive, run_items
from verifiers.calibration.rates import wilson
from verifiers.types import VerifyItem

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.engine import Engine

EXAMPLES_PER_FAMILY = 5


def generate(
    references: list[Any], families: tuple[str, ...], *, per_family: int | None = None, seed: int = 0
) -> list[tuple[int, str, str, str]]:
    """(row, family, variant, response) for every reference; ``per_family`` samples that many variants per row."""
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise AuditInputError(f"unknown probe families {unknown}; known: {', '.join(FAMILIES)}")
    rng = random.Random(seed)
    golds = [gold_text(r) for r in references]
    out: list[tuple[int, str, str, str]] = []
    harness = any(f in HARNESS_FAMILIES or f == "code_harness" for f in families)
    for row, (reference, gold) in enumerate(zip(references, golds)):
        entry = entry_point(reference)
        facts = code_facts(reference, entry) if harness else None
        target = Target(gold, wrong_answers(gold, golds, rng), entry, rng, facts)
        for family in families:
            probes = FAMILIES[family](target)
            if per_family is not None and len(probes) > per_family:
                probes = rng.sample(probes, per_family)
            out.extend((row, family, variant, response) for variant, response in probes)
    return out


def parse_references(rows: list[dict[str, Any]]) -> list[Any]:
    refs = []
    for i, row in enumerate(rows):
        if "reference" not in row:
            raise AuditInputError('each probe row needs a "reference"', i)
        refs.append(row["reference"])
    if not refs:
        raise AuditInputError("the audit holds no rows")
    return refs


async def probe_audit(
    engine: Engine,
    verifier: str,
    rows: list[dict[str, Any]],
    options: dict[str, Any] | None = None,
    *,
    families: list[str] | tuple[str, ...] | None = None,
    per_family: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    options = dict(options or {})
    report, _ = audit_header("probes", engine, verifier, options)
    references = parse_references(rows)
    chosen = tuple(families) if families else default_families(verifier)
    probes = generate(references, chosen, per_family=per_family, seed=seed)
    verdicts = await run_items(engine, [
        VerifyItem(verifier, response, references[row], options, f"{row}:{family}:{variant}")
        for row, family, variant, response in probes
    ])
    per_family_stats: dict[str, dict[str, Any]] = {
        f: {"n": 0, "fp": 0, "unscored": 0, "variants": {}, "examples": []} for f in chosen
    }
    for (row, family, variant, response), v in zip(probes, verdicts):
        stats = per_family_stats[family]
        var = stats["variants"].setdefault(variant, {"n": 0, "fp": 0, "unscored": 0})
        if not v.status.scored:
            stats["unscored"] += 1
            var["unscored"] += 1
            continue
        stats["n"] += 1
        var["n"] += 1
        if is_positive(v):
            stats["fp"] += 1
            var["fp"] += 1
            if len(stats["examples"]) < EXAMPLES_PER_FAMILY:
                stats["examples"].append({"row": row, "variant": variant, "reference": clip(references[row], 200),
                                          "response": clip(response), "score": v.score, "reason": v.reason})
    for stats in per_family_stats.values():
        stats["fp_rate"] = wilson(stats["fp"], stats["n"]).to_dict()
    n = sum(s["n"] for s in per_family_stats.values())
    fp = sum(s["fp"] for s in per_family_stats.values())
    report.update(
        n_references=len(references),
        n_probes=len(probes),
        families=per_family_stats,
        fp_rate=wilson(fp, n).to_dict(),
        statuses=count_statuses(verdicts),
        per_family=per_family,
        seed=seed,
    )
    return report
