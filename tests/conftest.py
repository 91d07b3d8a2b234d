"""Fixtures every test folder shares: one live server with default settings, the shared data sets, and the
OpenAI-compatible judge double."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes.openai_server import FakeOpenAI, gullible_judge, serve
from tests.support.judges import API_KEY
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


@pytest.fixture(scope="module")
def _judge_server() -> Iterator[FakeOpenAI]:
    with serve(FakeOpenAI(api_key=API_KEY)) as fake:
        yield fake


@pytest.fixture
def fake(_judge_server: FakeOpenAI) -> FakeOpenAI:
    """The OpenAI-compatible judge double, reset, answering as the gullible judge (a module may define its own)."""
    _judge_server.reset()
    _judge_server.responder = gullible_judge
    _judge_server.latency_s = 0.0
    return _judge_server
