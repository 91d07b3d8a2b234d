"""The ecosystem's real clients against /envs/{name}: openenv-core's WebSocket client (with a re-attach after a
dropped socket) and its HTTP validator, and the mcp SDK's streamable HTTP client, each through an episode, reward
included."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.support.server import LiveServer

openenv_client = pytest.importorskip("openenv.core.generic_client", reason="the environments extra is not installed")
pytest.importorskip("mcp", reason="the environments extra is not installed")


def test_openenv_validator_passes_on_each_mounted_environment(env_server: LiveServer) -> None:
    from openenv.cli._validation import validate_running_environment

    for name in ("python", "sql"):
        report = validate_running_environment(f"{env_server.url}/envs/{name}")
        assert report["passed"], report["criteria"]


def test_openenv_websocket_client_reattaches_after_a_dropped_socket(env_server: LiveServer) -> None:
    client_cls = openenv_client.GenericEnvClient

    async def episode() -> str:
        first = client_cls(base_url=f"{env_server.url}/envs/python")
        await first.connect()
        result = await first.reset(prompt="6*7?", reward={"verifier": "math", "reference": "42"})
        sid = result.observation["session_id"]
        assert (await first.step({"code": "x = 6 * 7"})).observation["status"] == "ok"
        assert first._ws is not None
        await first._ws.close()  # the socket drops: no close message, as a lost connection sends none
        again = client_cls(base_url=f"{env_server.url}/envs/python/sessions/{sid}")
        await again.connect()
        assert (await again.state())["step_count"] == 1
        seen = await again.step({"code": "x"})
        assert seen.observation["value"] == "42" and seen.done is False
        end = await again.step({"final_answer": "\\boxed{42}"})
        assert end.done is True and end.reward == 1.0
        await again.close()  # sends close: the session ends
        return sid

    sid = asyncio.run(episode())
    r = httpx.get(f"{env_server.url}/envs/python/state", params={"session_id": sid})
    assert r.status_code == 410


def test_mcp_client_drives_a_sql_episode_opened_by_reset(env_server: LiveServer) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    gold = "SELECT count(*) FROM concert"
    r = httpx.post(f"{env_server.url}/envs/sql/reset", json={
        "database": "concert_singer", "reward": {"verifier": "sql", "reference": {"sql": gold,
                                                                                  "database": "concert_singer"}}})
    sid = r.json()["observation"]["session_id"]

    async def episode() -> None:
        async with streamable_http_client(f"{env_server.url}/envs/sql/mcp?session_id={sid}") as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert tools == {"query", "final_answer"}
            rows = await session.call_tool("query", {"query": gold})
            assert not rows.is_error and rows.structured_content["observation"]["status"] == "ok"
            refused = await session.call_tool("query", {"query": "DELETE FROM concert"})
            assert refused.is_error
            end = await session.call_tool("final_answer", {"answer": gold})
            assert end.structured_content["done"] is True and end.structured_content["reward"] == 1.0

    asyncio.run(episode())


def test_mcp_client_opens_a_python_session_of_its_own(env_server: LiveServer) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def episode() -> None:
        async with streamable_http_client(f"{env_server.url}/envs/python/mcp") as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("run_code", {"code": "total = sum(range(10))"})
            out = await session.call_tool("run_code", {"code": "total"})
            assert out.structured_content["observation"]["value"] == "45"
            text = out.content[0].text  # type: ignore[union-attr]
            assert "45" in text

    asyncio.run(episode())
