"""BFCL multi-turn episodes: BFCL's simulated APIs driven by parsed calls (never ``eval``) and its checks."""
from verifiers.kinds.bfcl.verifier import VERIFIERS

__all__ = ["VERIFIERS"]
