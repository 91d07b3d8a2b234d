"""Process and outcome reward models: loading, input formats, step splitting, aggregation and batched scoring.

Importing this package never imports torch; only loading a model does, so the service runs without the
``models`` extra when no reward model is configured.
"""
from verifiers.kinds.reward_models.verifier import VERIFIERS

__all__ = ["VERIFIERS"]
