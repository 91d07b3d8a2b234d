"""The probe audit of the ``code`` verifier end to end: real HumanEval/MBPP references, generated harness attacks,
the real bubblewrap sandbox. A small subset by default (tasks whose tests use prompt helpers, builtins and a
function named like a builtin); REWARD_SERVICE_AUDIT_CODE_REFS=N widens it to N random tasks of each set."""
from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.code import CodeRunner, humaneval, humaneval_reference, mbpp, mbpp_reference
from verifiers.audit import probe_audit
from verifiers.audit.harness_attacks import HARNESS_FAMILIES, code_facts

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PICKED_HUMANEVAL = ("HumanEval/32", "HumanEval/38", "HumanEval/0")  # poly + range, encode_cyclic, plain asserts
PICKED_MBPP = (126, 2)  # function named sum; set-style tuple answers


@pytest.fixture(scope="module")
def runner() -> Iterator[CodeRunner]:
    r = CodeRunner()
    yield r
    r.close()


def _rows(data: Path) -> list[dict]:
    he, mb = humaneval(data), mbpp(data)
    extra = int(os.environ.get("REWARD_SERVICE_AUDIT_CODE_REFS", "0"))
    rng = random.Random(0)
    chosen_he = [t for t in he if t["task_id"] in PICKED_HUMANEVAL] + (rng.sample(he, extra) if extra else [])
    chosen_mb = [t for t in mb if t["task_id"] in PICKED_MBPP] + (rng.sample(mb, extra) if extra else [])
    return ([{"reference": humaneval_reference(t)} for t in chosen_he]
            + [{"reference": mbpp_reference(t)} for t in chosen_mb])


def test_attacks_aim_at_what_each_reference_tests(shared_data: Path) -> None:
    he = {t["task_id"]: t for t in humaneval(shared_data)}
    mb = {t["task_id"]: t for t in mbpp(shared_data)}
    facts = code_facts(humaneval_reference(he["HumanEval/32"]), "x")
    assert facts.subjects == ["find_zero"] and "poly" in facts.helpers and "range" in facts.test_builtins
    assert "math" in facts.modules
    assert code_facts(humaneval_reference(he["HumanEval/38"]), "x").helpers == ["encode_cyclic"]
    assert code_facts(mbpp_reference(mb[2]), "x").subjects == ["similar_elements"]
    assert code_facts(mbpp_reference(mb[126]), "x").subjects == ["sum"]  # the asserts call nothing else


def test_harness_attack_families_are_never_rewarded(runner: CodeRunner, shared_data: Path) -> None:
    rows = _rows(shared_data)
    report = runner.loop.run_until_complete(
        probe_audit(runner.engine, "code", rows, {}, families=list(HARNESS_FAMILIES), per_family=4, seed=1))
    assert set(report["families"]) == set(HARNESS_FAMILIES)
    for family, stats in report["families"].items():
        assert stats["n"] >= len(rows) * 3, (family, stats["n"], stats["unscored"])  # the probes really ran
        assert stats["fp"] == 0, (family, stats["examples"])
    assert report["fp_rate"]["value"] == 0.0 and report["statuses"].get("ok", 0) >= report["n_probes"] * 0.9


def test_the_references_are_passable(runner: CodeRunner, shared_data: Path) -> None:
    """Control: the same references reward their canonical solutions, so a zero above is the harness holding."""
    he = {t["task_id"]: t for t in humaneval(shared_data)}
    mb = {t["task_id"]: t for t in mbpp(shared_data)}
    pairs = [(he[i]["canonical_solution"], humaneval_reference(he[i])) for i in PICKED_HUMANEVAL]
    pairs += [(mb[i]["code"], mbpp_reference(mb[i])) for i in PICKED_MBPP]
    assert [v.score for v in runner.many(pairs)] == [1.0] * len(pairs)
