"""The ``sql`` verifier: text-to-SQL answers scored by executing them beside the gold query, read-only."""
from verifiers.kinds.sql.verifier import VERIFIERS

__all__ = ["VERIFIERS"]
