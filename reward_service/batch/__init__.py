"""Batch scoring of rollout files (``reward-service score``): resumable, embedded or against a server."""
