"""Agreement of ``tool_calls`` with BFCL's own AST checker on BFCL v4's non-live categories (../shared/data/tools).

Candidates are made from each entry's possible answers: the right calls, other acceptable values, optional arguments
left out, parallel calls reordered, strings BFCL's normalisation forgives, an int for a float; and mistakes: a wrong
value, a missing argument, an unknown argument, a float for an int, a dropped or duplicated call, the wrong function,
prose instead of a call. Each is written three ways (structured OpenAI ``tool_calls``, Hermes ``<tool_call>`` text,
Python call text as BFCL's prompt mode asks) and scored through the verifier; BFCL's ``ast_checker`` (bfcl-eval,
installed with ``--no-deps``) judges the same calls. Structured calls with underscored dotted names are judged as
BFCL judges a function-calling model (whose API cannot carry dots), every other candidate as a prompt-mode model.
"""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from tests.support.tool_calls import (
    CATEGORIES,
    Calls,
    Entry,
    as_messages,
    bfcl_oracle,
    candidates,
    decoded,
    load_entries,
    render,
)
from verifiers import conversation
from verifiers.kinds.tool_calls import ToolCallsVerifier
from verifiers.types import Status

V = ToolCallsVerifier()
OPTIONS = V.parse_options({})
RENDERINGS = ("structured", "hermes", "python")


@pytest.fixture(scope="module")
def tools_dir(shared_data: Path) -> Path:
    path = shared_data / "tools"
    if not (path / "possible_answer").is_dir():
        pytest.skip("BFCL data under ../shared/data/tools is absent")
    return path


def score(calls: Calls | None, entry: Entry, how: str) -> tuple[float | None, Status]:
    reference = {"calls": entry.ground_truth, "tools": entry.functions}
    if how == "structured":
        messages = as_messages(entry, calls)
        with conversation.bound(messages):  # as the engine binds an item's trajectory around its check
            verdict = V.check(conversation.final_text(messages), reference, OPTIONS)
    else:
        verdict = V.check(render(calls, how), reference, OPTIONS)
    return verdict.score, verdict.status


@pytest.mark.parametrize("category", CATEGORIES)
def test_agreement_with_bfcls_checker(tools_dir: Path, category: str) -> None:
    oracle = bfcl_oracle()
    if oracle is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    total: collections.Counter[str] = collections.Counter()
    agree: collections.Counter[str] = collections.Counter()
    disagreements = []
    mutations = set()
    for c in candidates(load_entries(tools_dir, category)):
        output = decoded(c.calls)
        for how in RENDERINGS:
            want = oracle(c.entry, output, False)
            if how == "structured" and c.mutation == "underscored_name":
                want = oracle(c.entry, output, True)
            got, status = score(c.calls, c.entry, how)
            assert status in (Status.OK, Status.NO_ANSWER), (c.entry.id, c.mutation, how, status)
            total[how] += 1
            mutations.add((c.mutation, want))
            if (got == 1.0) == want:
                agree[how] += 1
            elif len(disagreements) < 10:
                disagreements.append((c.entry.id, c.mutation, how, want))
    for how in RENDERINGS:
        assert agree[how] / total[how] >= 0.99, (how, agree[how], total[how], disagreements)
    # The candidates must exercise both verdicts, or agreement says nothing.
    assert any(want for _, want in mutations) and any(not want for _, want in mutations)


def self_consistent(entry: Entry) -> bool:
    """Whether every argument of the entry's possible answers is in its function's spec."""
    specs = {f["name"]: f["parameters"].get("properties", {}) for f in entry.functions}
    return all(set(params) <= set(specs.get(name, {})) for gt in entry.ground_truth for name, params in gt.items())


def test_plainly_right_and_plainly_wrong_candidates(tools_dir: Path) -> None:
    """Without BFCL's code: mutations whose verdict its rules fix whatever the entry. Reordered parallel calls are
    not among them: BFCL matches greedily in reference order, so an answer that accepts two values can take the call
    another answer needed (parallel_178); the maximum matching of partial credit still pairs them all."""
    right = {"canonical", "int_for_float"}  # not string_normalised: a string where an array is due compares exactly
    wrong = {"extra_arg", "wrong_function", "dropped_call", "duplicated_call", "call_anyway", "float_for_int"}
    partial = V.parse_options({"partial": True})
    seen: collections.Counter[str] = collections.Counter()
    for category in CATEGORIES:
        irrelevance = category == "irrelevance"
        for c in candidates(load_entries(tools_dir, category)):
            for how in RENDERINGS:
                got, _ = score(c.calls, c.entry, how)
                if c.mutation in right or (irrelevance and c.mutation in ("prose", "empty_list")):
                    # A few possible answers name an argument their own spec lacks (parallel_multiple_12): BFCL
                    # rejects those answers too, so the right set must pass where the data agrees with itself.
                    assert got == 1.0 or not self_consistent(c.entry), (c.entry.id, c.mutation, how)
                elif c.mutation in wrong or c.mutation == "prose":
                    assert got == 0.0, (c.entry.id, c.mutation, how)
                elif c.mutation in ("reversed", "shuffled"):
                    reference = {"calls": c.entry.ground_truth, "tools": c.entry.functions}
                    verdict = V.check(render(c.calls, "hermes"), reference, partial)
                    assert verdict.score == 1.0 or not self_consistent(c.entry), (c.entry.id, c.mutation)
                else:
                    continue
                seen[c.mutation] += 1
    assert set(seen) >= right | wrong | {"prose", "reversed", "shuffled", "empty_list"}
