"""Fixtures of the sandbox tests: one bubblewrap sandbox reused run after run."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.sandbox import OneSandbox


@pytest.fixture()
def box() -> Iterator[OneSandbox]:
    with OneSandbox() as runner:
        yield runner
