"""reward-service: a verifier and reward-model service for RL trainers of language models."""

__version__ = "0.1.0"
