"""The verifier library: verdict types, a registry of verifiers, and an engine that runs them with deadlines.

Usable without the HTTP service::

    from verifiers import VerifyItem, verify_sync
    verify_sync(VerifyItem(verifier="exact_match", response="Paris", reference="paris"))
"""
from verifiers.base import BaseOptions, Verifier
from verifiers.engine import Engine, verify_sync
from verifiers.engine.registry import Registry, UnknownVerifier, build_registry
from verifiers.types import InvalidReference, Status, Verdict, VerifierUnavailable, VerifyItem

__all__ = [
    "BaseOptions",
    "Engine",
    "InvalidReference",
    "Registry",
    "Status",
    "UnknownVerifier",
    "Verdict",
    "Verifier",
    "VerifierUnavailable",
    "VerifyItem",
    "build_registry",
    "verify_sync",
]
