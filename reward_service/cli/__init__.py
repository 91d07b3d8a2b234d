"""The ``reward-service`` command line: ``main`` (serve, verify, score, audit, prm-eval) in ``main.py``; each
command that is more than a few lines has its own module."""
from reward_service.cli.main import app, main

__all__ = ["app", "main"]
