"""Which verifier configuration a calibration belongs to.

Rates belong to a configuration, not a name: ``exact_match`` with ``ignore_case`` off is a different channel. The
hash covers every option that can change a verdict, defaults included (so an explicit default hashes like an
omitted one), and leaves out the options that only steer execution or post-processing.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from verifiers.base import Verifier

# BaseOptions fields that never change the raw verdict.
NON_SEMANTIC_OPTIONS = frozenset({"timeout_s", "correction", "appeal", "noise_rates"})


@dataclass(frozen=True)
class ConfigKey:
    name: str
    version: str
    options_hash: str

    def __str__(self) -> str:
        return f"{self.name}@{self.version}#{self.options_hash}"


def options_hash(options: BaseModel) -> str:
    data = options.model_dump(mode="json", exclude=set(NON_SEMANTIC_OPTIONS))
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def config_key(verifier: Verifier[Any], options: BaseModel) -> ConfigKey:
    return ConfigKey(str(verifier.name), str(getattr(verifier, "version", "1")), options_hash(options))
