"""The ``code`` verifier: programs from completions scored by unit tests in the sandbox."""
from verifiers.kinds.code.verifier import VERIFIERS

__all__ = ["VERIFIERS"]
