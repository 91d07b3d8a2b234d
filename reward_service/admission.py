"""Admission control: a bounded budget of pending items. A request that does not fit is refused at once with
429 + Retry-After, so overload shows up as back-pressure at the trainer instead of a growing backlog."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from reward_service.errors import ApiError


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
