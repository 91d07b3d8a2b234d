"""Admission control: a bounded budget of pending items. A request that does not fit is refused at once with
429 + Retry-After, so overload shows up as back-pressure at the trainer instead of a growing backlog.

``Admission`` is the app-wide budget; ``AdmissionGate`` is one request's view of it, handed to routes by
``deps.AdmissionDep``. The gate never refuses on its own when it is created: a route calls ``ready()`` and
``admit(n)`` at the point where it checks them, so the order of answers (422/413 for the body first, then
503/429) stays what each route documents.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reward_service.errors import ApiError

if TYPE_CHECKING:
    from reward_service.resources.runtime import Runtime


class Overloaded(Exception):
    def __init__(self, pending: int, capacity: int):
        super().__init__(f"server is saturated: {pending} items pending of {capacity}")
        self.pending = pending
        self.capacity = capacity


class Admission:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.pending = 0
        self.draining = False

    @contextmanager
    def admit(self, n: int) -> Iterator[None]:
        if n > self.capacity:  # retrying cannot help: refuse as too large, not as busy
            raise ApiError(413, f"batch of {n} items exceeds the admission queue of {self.capacity} items "
                                f"(max_pending_items); split it", loc=["items"])
        if self.pending + n > self.capacity:
            raise Overloaded(self.pending, self.capacity)
        self.pending += n
        try:
            yield
        finally:
            self.pending -= n


@dataclass
class AdmissionGate:
    """Admission control as seen by one request: 503 while starting or draining, 413/429 when items do not fit."""

    admission: Admission
    runtime: Runtime | None
    retry_after_s: int
    on_refused: Callable[[], None]  # counts a 429 (reward_admission_rejected_total{reason="saturated"})

    @property
    def retry_headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}

    def ready(self) -> Runtime:
        """The runtime, or 503 + Retry-After while the server starts or drains."""
        if self.runtime is None or self.admission.draining:
            raise ApiError(503, "server is starting or shutting down", headers=self.retry_headers)
        return self.runtime

    @contextmanager
    def admit(self, n: int) -> Iterator[None]:
        """Hold ``n`` items of the budget for the block: 413 when they can never fit, 429 + Retry-After when full."""
        try:
            with self.admission.admit(n):
                yield
        except Overloaded as exc:
            self.on_refused()
            raise ApiError(429, str(exc), headers=self.retry_headers) from None
