"""The environments this service offers: each module of ``BUILTIN_MODULES`` exports ``ENVIRONMENTS``, a list of
``Environment`` subclasses; an environment is added by adding its module here."""
from __future__ import annotations

import importlib
import re

from environments.base import Environment

BUILTIN_MODULES = ("environments.kinds.python", "environments.kinds.sql", "environments.kinds.bfcl")
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")  # a URL path segment: /envs/{name}/...


def load_environments(modules: tuple[str, ...] | list[str] = BUILTIN_MODULES) -> dict[str, type[Environment]]:
    found: dict[str, type[Environment]] = {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for cls in module.ENVIRONMENTS:
            if not NAME.match(cls.name):
                raise ValueError(f"environment name {cls.name!r} ({module_name}) is not a path segment")
            if cls.name in found:
                raise ValueError(f"two environments are named {cls.name!r}")
            found[cls.name] = cls
    return found
