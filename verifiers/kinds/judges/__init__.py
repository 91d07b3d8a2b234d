"""LLM judges: backends (OpenAI-compatible HTTP, local transformers), a completion cache, hardened prompts,
guards and parsing, the judge verifiers and the generative PRM. Importing this package never imports torch."""
from verifiers.kinds.judges import generative_prm, verifier

VERIFIERS = [*verifier.VERIFIERS, *generative_prm.VERIFIERS]

__all__ = ["VERIFIERS"]
