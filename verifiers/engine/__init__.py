"""The engine and its machinery: what runs a verifier's check, never imported by a verifier.

``core`` (``Engine``: prepare, deadline, dispatch, stages, group pass, report), ``local`` (hard deadlines for library
use: ``local_engine``, ``LocalVerifier``, ``verify_sync``), ``pool`` (killable worker processes) with ``fairness``
(whose items a free worker takes next), ``worker`` and ``frames`` (the worker process and its pipe protocol),
``worker_config``, ``failures`` (every exception to one named verdict), ``registry`` and ``groups`` (the group pass).
"""
from verifiers.engine.core import Engine, Prepared, ResultHook, Stage
from verifiers.engine.local import LocalVerifier, local_engine, verify_sync

__all__ = ["Engine", "LocalVerifier", "Prepared", "ResultHook", "Stage", "local_engine", "verify_sync"]
