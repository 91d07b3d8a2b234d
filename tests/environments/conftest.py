"""One real server for the environments' tests: the sql verifier's databases built on disk, a small per-client
maximum so the capacity test can reach it."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.server import LiveServer, run_server
from tests.support.sql import build_databases

PER_CLIENT = 12


@pytest.fixture(scope="module")
def env_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("envs")
    databases = build_databases(root / "databases")
    with run_server(root, env={"REWARD_SERVICE_SQL_DATABASES_DIR": str(databases),
                               "REWARD_SERVICE_ENV_MAX_SESSIONS_PER_CLIENT": str(PER_CLIENT),
                               "REWARD_SERVICE_ENV_SESSION_WARM_POOL": "2"}) as server:
        yield server
