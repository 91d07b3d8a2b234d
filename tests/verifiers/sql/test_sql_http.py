"""The sql verifier through the real server (127.0.0.1) and the worker pool: a batch mixing right, wrong, hostile
and broken items gets one named verdict each; bad options are a 422; the database file is left byte-identical."""
from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import LiveServer, run_server
from tests.support.sql import build_databases, digest
from verifiers.engine.pool import WorkerPool

GOLD = {"sql": "SELECT name, age FROM singer WHERE country = 'France' ORDER BY age", "database": "concert_singer"}


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_databases(tmp_path_factory.mktemp("sqldb"))


@pytest.fixture(scope="module")
def sql_server(databases: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"REWARD_SERVICE_SQL_DATABASES_DIR": str(databases)}
    with run_server(tmp_path_factory.mktemp("sqlserver"), env=env) as live:
        yield live


def test_a_mixed_batch_over_http(sql_server: LiveServer, databases: Path, tmp_path: Path) -> None:
    db = databases / "concert_singer" / "concert_singer.sqlite"
    before = digest(db)
    drop = tmp_path / "dropped.sqlite"
    items = {
        "right": "The query is:\n```sql\nSELECT s.age, s.name FROM singer s WHERE s.country = 'France' ORDER BY 1\n```",
        "unordered": "SELECT name, age FROM singer WHERE country = 'France'",
        "syntax": "SELECT name age FROM singer WHERE country = 'France' ORDER age",
        "attach": f"ATTACH '{drop}' AS evil",
        "vacuum": f"```sql\nVACUUM INTO '{drop}'\n```",
        "chained": "SELECT name, age FROM singer WHERE country = 'France' ORDER BY age; DROP TABLE singer",
        "runaway": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        "prose": "I cannot write SQL.",
    }
    body = [{"id": key, "verifier": "sql", "response": text, "reference": GOLD, "options": {"query_timeout_s": 1}}
            for key, text in items.items()]
    body.append({"id": "bad_db", "verifier": "sql", "response": "SELECT 1",
                 "reference": {"sql": "SELECT 1", "database": "../concert_singer"}})
    body.append({"id": "bad_gold", "verifier": "sql", "response": "SELECT 1",
                 "reference": {"sql": "SELECT nickname FROM singer", "database": "concert_singer"}})
    with sql_server.client() as client:
        response = client.post("/v1/verify", json={"items": body})
    assert response.status_code == 200, response.text
    got = {r["id"]: r for r in response.json()["results"]}
    assert (got["right"]["status"], got["right"]["score"]) == ("ok", 1.0)
    assert got["right"]["details"]["extracted_from"] == "fenced:sql"
    assert got["unordered"]["score"] == 0.0 and "another order" in got["unordered"]["reason"]
    assert got["syntax"]["score"] == 0.0 and "syntax error" in got["syntax"]["reason"]
    for key in ("attach", "vacuum", "chained"):
        assert (got[key]["status"], got[key]["score"]) == ("rejected", 0.0), got[key]
    assert got["runaway"]["status"] == "ok" and got["runaway"]["details"]["error"] == "timeout"
    assert got["prose"]["status"] == "no_answer"
    assert got["bad_db"]["status"] == "invalid_reference" and got["bad_db"]["score"] is None
    assert got["bad_gold"]["status"] == "invalid_reference" and "nickname" in got["bad_gold"]["reason"]
    assert digest(db) == before and not drop.exists()


def test_bad_options_are_422(sql_server: LiveServer) -> None:
    with sql_server.client() as client:
        for options in [{"compare": "fuzzy"}, {"query_timeout_s": 0}, {"float_tolerance": -1}, {"engine": "oracle"},
                        {"max_rows": 0}, {"bogus": 1}]:
            item = {"verifier": "sql", "response": "SELECT 1", "reference": GOLD, "options": options}
            response = client.post("/v1/verify", json={"items": [item]})
            assert response.status_code == 422, (options, response.text)
        listed = client.get("/v1/verifiers").json()
    assert "sql" in str(listed)


def test_pool_workers_find_the_databases_from_their_configuration(
        databases: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No environment variable: the workers know the directory from the pool's WorkerConfig alone."""
    monkeypatch.delenv("REWARD_SERVICE_SQL_DATABASES_DIR", raising=False)

    async def go(directory: str) -> tuple[str, float | None]:
        pool = WorkerPool(1, ["verifiers.kinds.sql"], sql_databases_dir=directory)
        await pool.start()
        try:
            verdict = await pool.run("sql", GOLD["sql"], GOLD, {}, timeout_s=60)
        finally:
            await pool.close()
        return verdict.status.value, verdict.score

    assert "REWARD_SERVICE_SQL_DATABASES_DIR" not in os.environ
    assert asyncio.run(go(str(databases))) == ("ok", 1.0)
    assert asyncio.run(go(""))[0] == "unavailable"
