"""LLM judges: backends (OpenAI-compatible HTTP, local transformers), a completion cache, hardened prompts,
guards and parsing, the judge verifiers (a trajectory's checklist among them) and the generative PRM. Importing this
package never imports torch."""
from typing import Any

from verifiers.base import Verifier
from verifiers.kinds.judges import generative_prm, trajectory, verifier

VERIFIERS: list[Verifier[Any]] = [*verifier.VERIFIERS, *trajectory.VERIFIERS, *generative_prm.VERIFIERS]

__all__ = ["VERIFIERS"]
