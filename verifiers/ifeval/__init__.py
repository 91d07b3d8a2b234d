"""Instruction-following verification (IFEval and extra constraints); the registry reads ``VERIFIERS``."""
from verifiers.ifeval.verifier import CATALOG, VERIFIERS, IfEval, follow_list, parse_reference

__all__ = ["CATALOG", "IfEval", "VERIFIERS", "follow_list", "parse_reference"]
