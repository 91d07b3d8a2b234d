"""Thin client for reward-service: httpx only, no torch, installable on its own."""
__version__ = "0.1.0"
