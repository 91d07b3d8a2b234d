"""Name → verifier lookup, filled from modules that each expose ``VERIFIERS``.

A registry is built, not global: the app's lifespan and each worker process build their own from the same module
list, so a plugin module named in settings is visible everywhere a built-in one is.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from typing import Any

from verifiers.base import Verifier
from verifiers.types import UnknownVerifier

__all__ = ["BUILTIN_MODULES", "Registry", "UnknownVerifier", "build_registry", "load_modules"]

# Built-in verifier kinds (``verifiers.kinds``). Each module or package exports ``VERIFIERS: list[Verifier[Any]]``.
BUILTIN_MODULES: tuple[str, ...] = (
    "verifiers.kinds.judges",
    "verifiers.kinds.basic",
    "verifiers.kinds.math.verifier",
    "verifiers.kinds.math.math_verify_verifier",
    "verifiers.kinds.consensus",
    "verifiers.kinds.ifeval",
    "verifiers.kinds.tool_calls",
    "verifiers.kinds.bfcl",
    "verifiers.kinds.code",
    "verifiers.kinds.reward_models",
    "verifiers.kinds.shaping",
    "verifiers.kinds.spec",
    "verifiers.kinds.sql",
    "verifiers.kinds.lean",
    "verifiers.kinds.rules",
)


class Registry:
    def __init__(self) -> None:
        self._verifiers: dict[str, Verifier[Any]] = {}

    def register(self, verifier: Verifier[Any]) -> None:
        if verifier.name in self._verifiers:
            raise ValueError(f"verifier {verifier.name!r} registered twice")
        self._verifiers[verifier.name] = verifier

    def get(self, name: str) -> Verifier[Any]:
        try:
            return self._verifiers[name]
        except KeyError:
            raise UnknownVerifier(name, self._verifiers) from None

    def __contains__(self, name: object) -> bool:
        return name in self._verifiers

    def __iter__(self) -> Iterator[Verifier[Any]]:
        return iter(self._verifiers.values())

    def names(self) -> list[str]:
        return sorted(self._verifiers)


def load_modules(modules: Iterable[str]) -> Registry:
    registry = Registry()
    for module_name in modules:
        module = importlib.import_module(module_name)
        for verifier in module.VERIFIERS:
            registry.register(verifier)
    return registry


def build_registry(extra_modules: Iterable[str] = ()) -> Registry:
    return load_modules([*BUILTIN_MODULES, *extra_modules])
