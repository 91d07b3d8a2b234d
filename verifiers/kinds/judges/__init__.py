"""LLM judges: backends (OpenAI-compatible HTTP, local transformers), a completion cache, hardened prompts,
guards and parsing, and the judge verifiers. Importing this package never imports torch."""
from typing import Any

from verifiers.base import Verifier
from verifiers.kinds.judges import trajectory, verifier

VERIFIERS: list[Verifier[Any]] = [*verifier.VERIFIERS, *trajectory.VERIFIERS]

__all__ = ["VERIFIERS"]
