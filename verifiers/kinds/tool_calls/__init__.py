"""Tool-call rewards: BFCL's AST rules over structured or generated calls; the registry reads ``VERIFIERS``."""
from verifiers.kinds.tool_calls.verifier import VERIFIERS, ToolCallsVerifier, parse_reference

__all__ = ["ToolCallsVerifier", "VERIFIERS", "parse_reference"]
