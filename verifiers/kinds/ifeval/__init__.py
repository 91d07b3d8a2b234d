"""Instruction-following verification (IFEval and extra constraints); the registry reads ``VERIFIERS``."""
from verifiers.kinds.ifeval.verifier import CATALOG, VERIFIERS, IfEvalVerifier, follow_list, parse_reference

__all__ = ["CATALOG", "IfEvalVerifier", "VERIFIERS", "follow_list", "parse_reference"]
