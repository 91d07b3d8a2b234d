"""Per-request limits are allowed only within the operator's caps."""
from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import TypeGuard

from sandbox.api import Limits


def default_caps() -> Limits:
    """The caps of a backend configured without any: the most any request may ask for."""
    return Limits(wall_s=60, cpu_s=60, memory_mb=4096, processes=256, file_size_mb=256, open_files=1024,
                  output_bytes=16 << 20, disk_mb=1024)


def over_caps(limits: Limits, caps: Limits) -> list[str]:
    """Each limit above its cap (or not positive), in words; empty when the request fits."""
    problems = []
    for f in fields(Limits):
        value, cap = getattr(limits, f.name), getattr(caps, f.name)
        if not _finite_number(value):
            problems.append(f"{f.name} must be a finite number (got {value!r})")
        elif value <= 0:
            problems.append(f"{f.name} must be positive (got {value})")
        elif value > cap:
            shown = "a number over 2**64" if isinstance(value, int) and value.bit_length() > 64 else value
            problems.append(f"{f.name}={shown} exceeds the server cap of {cap}")
    return problems


def clamp(limits: Limits, caps: Limits) -> Limits:
    """Defence in depth for library callers that skipped ``over_caps``: never run above a cap."""
    values = asdict(limits)
    return Limits(**{k: min(v, getattr(caps, k)) if _usable(v) else getattr(caps, k) for k, v in values.items()})


def _finite_number(value: object) -> TypeGuard[int | float]:
    """An int or a finite float (math.isfinite would overflow on an int beyond a float's range: 10**400)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _usable(value: object) -> bool:
    return _finite_number(value) and value > 0
