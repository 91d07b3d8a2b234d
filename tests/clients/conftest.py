"""Fixtures of the client and trainer-adapter tests: a scripted server, an OpenRLHF-configured live server, and
verl's reward module loaded as verl loads it."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.client import load_like_verl, scripted_server
from tests.support.server import LiveServer, run_env_server, run_server


@pytest.fixture(scope="module")
def openrlhf_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"REWARD_SERVICE_OPENRLHF_VERIFIER": "exact_match", "REWARD_SERVICE_OPENRLHF_NULL_REWARD": "-0.5",
           "REWARD_SERVICE_AUTH_TOKEN": "tok"}
    with run_server(tmp_path_factory.mktemp("openrlhf"), env) as live:
        yield live


@pytest.fixture()
def verl_module(server: LiveServer, monkeypatch: pytest.MonkeyPatch):
    import reward_client.verl as shipped

    monkeypatch.setenv("REWARD_CLIENT_URL", server.url)
    monkeypatch.setenv("REWARD_CLIENT_VERL_ROUTES", json.dumps({"capitals": "exact_match"}))
    return load_like_verl(shipped.__file__)


@pytest.fixture(scope="module")
def scripted() -> Iterator[str]:
    with scripted_server() as url:
        yield url


@pytest.fixture(scope="module")
def env_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real server with its environments, the sql verifier's databases built on disk."""
    with run_env_server(tmp_path_factory.mktemp("envs")) as live:
        yield live
