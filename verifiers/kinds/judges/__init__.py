"""LLM judges: backends (OpenAI-compatible HTTP, local transformers), a completion cache, hardened prompts,
guards and parsing, and the judge verifiers. Importing this package never imports torch."""
from verifiers.kinds.judges.verifier import VERIFIERS

__all__ = ["VERIFIERS"]
