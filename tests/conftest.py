"""Fixtures every test folder shares: one live server with default settings, and the shared data sets."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import SHARED_DATA, LiveServer, run_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One shared server with default settings plus the misbehaving test verifiers."""
    with run_server(tmp_path_factory.mktemp("server")) as live:
        yield live


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data sets not found at {SHARED_DATA}")
    return SHARED_DATA
