"""Lean 4 proofs checked by a Kimina Lean server: a batching client of its wire protocol, static refusals, and the
``lean`` verifier."""
from verifiers.kinds.lean.verifier import VERIFIERS

__all__ = ["VERIFIERS"]
