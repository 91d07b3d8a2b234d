"""What an async verifier may reach while it checks: shared backends and the engine itself.

Resources are built by whoever owns their lifetime (the server's lifespan, a CLI run) and handed in by name, so the
verifier library never imports the server.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verifiers.types import VerifierUnavailable

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.engine import Engine


@dataclass
class Context:
    engine: Engine
    resources: dict[str, Any] = field(default_factory=dict)

    def resource(self, name: str) -> Any:
        """A named backend (``sandbox``, ``judges``, ``models``, ``calibration``...); unavailable if not configured."""
        try:
            return self.resources[name]
        except KeyError:
            raise VerifierUnavailable(f"backend {name!r} is not configured on this server") from None
