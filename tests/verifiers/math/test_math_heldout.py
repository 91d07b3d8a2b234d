"""Held-out sets of labelled responses in the styles models write (``benchmarks/math_heldout.py``: MATH-500, GSM8K,
AIME 2024 and AMC 2023 golds and solutions from ../shared/data, finished with every answer marker, prices, chat
template turns, chains, sets, decimal commas, worked-solution golds and hedges): per set, ``math`` has no more false
negatives and no more false positives than Math-Verify with its defaults."""
from __future__ import annotations

import multiprocessing
from collections import Counter

import pytest

from benchmarks.math_heldout import available, build, mv_case, tally
from verifiers.kinds.math.verifier import MathVerifier
from verifiers.types import InvalidReference

V = MathVerifier()
OPTS = V.parse_options({})


def ours(response: str, reference: str) -> bool:
    try:
        return V.check(response, reference, OPTS).score == 1.0
    except InvalidReference:
        return False


def test_heldout_sets_no_worse_than_math_verify() -> None:
    if not available():
        pytest.skip("the MATH-500/GSM8K/AIME/AMC files under ../shared/data/math are absent")
    sets = build()
    cases = [c for cs in sets.values() for c in cs]
    assert Counter(c.set for c in cases) == {name: len(cs) for name, cs in sets.items()}
    mine = tally(cases, [ours(c.response, c.reference) for c in cases])
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        theirs = tally(cases, pool.map(mv_case, [(c.response, c.reference) for c in cases], chunksize=16))
    table = {name: (mine["fp"][name], mine["fn"][name], theirs["fp"][name], theirs["fn"][name]) for name in sets}
    print(f"\nheld-out sets (ours FP, FN; Math-Verify FP, FN): {table}")
    for name, (fp, fn, mv_fp, mv_fn) in table.items():
        assert fp <= mv_fp and fn <= mv_fn, (name, table[name])
