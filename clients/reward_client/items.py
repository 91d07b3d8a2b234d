"""What callers send: plain dataclasses, or mappings with the same keys (both are accepted everywhere)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Union, cast


@dataclass
class VerifyItem:
    """Give ``response`` (the model output) or ``messages`` (a trajectory: OpenAI chat messages, with ``tools`` the
    specs the model was given); text verifiers score a trajectory's final assistant turn."""

    verifier: str
    response: str | None = None
    reference: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    group: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None


@dataclass
class PrmItem:
    """Give ``steps`` (already split) or ``response`` (the server splits it by its configured rule)."""

    prompt: str
    steps: list[str] | None = None
    response: str | None = None
    id: str | None = None


@dataclass
class SandboxRun:
    code: str
    id: str | None = None
    language: str = "python"
    stdin: str = ""
    args: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    collect: list[str] = field(default_factory=list)
    limits: dict[str, Any] = field(default_factory=dict)  # wall_s, cpu_s, memory_mb, ... within the server's caps


Payload = Union[Mapping[str, Any], VerifyItem, PrmItem, SandboxRun]


def to_wire(item: Payload) -> dict[str, Any]:
    """A JSON-ready dict; unset optional fields are left out so the server applies its own defaults."""
    # a dataclass instance, else a mapping (the declared type; dict() also takes the pairs it always took)
    data = asdict(item) if is_dataclass(item) and not isinstance(item, type) else dict(cast(Mapping[str, Any], item))
    return {k: v for k, v in data.items() if v is not None and not (k in ("options", "files", "collect", "args",
                                                                          "limits") and not v)}


def set_options(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge option dicts, later layers winning, where a None value means "not set" and never overrides.

    ``datasets`` stores a column of dicts as a struct, so every row carries every key any row has, None where the row
    had none; those Nones must neither reach the server nor mask a default given by the caller.
    """
    out: dict[str, Any] = {}
    for layer in layers:
        out.update({k: v for k, v in (layer or {}).items() if v is not None})
    return out
