"""Worker processes get their configuration on their command line (WorkerConfig), not through the environment."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.support.reward_models import _tiny_tokenizer
from verifiers.engine.pool import WorkerPool
from verifiers.engine.worker_config import WorkerConfig, parse_args


def test_config_round_trips_through_the_command_line() -> None:
    config = WorkerConfig(memory_mb=512, length_tokenizers={"tiny": "/models/tiny"})
    assert parse_args([*config.argv(), "verifiers.kinds.shaping"]) == (config, ["verifiers.kinds.shaping"])
    assert parse_args(["verifiers.kinds.shaping"]) == (WorkerConfig(), ["verifiers.kinds.shaping"])


def test_pool_workers_use_the_tokenizers_they_are_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No REWARD_SERVICE_LENGTH_TOKENIZERS in the environment: the workers know the tokenizer from the pool alone."""
    monkeypatch.delenv("REWARD_SERVICE_LENGTH_TOKENIZERS", raising=False)
    tok_dir = tmp_path / "tok"
    _tiny_tokenizer(tok_dir)
    options = {"mode": "linear", "max_length": 10, "unit": "tokens", "tokenizer": "tiny"}

    async def go() -> list[str | float | None]:
        pool = WorkerPool(1, ["verifiers.kinds.shaping"], length_tokenizers={"tiny": str(tok_dir)})
        await pool.start()
        try:
            known = await pool.run("length", "the answer is four", None, options, timeout_s=60)
            other = await pool.run("length", "x", None, {**options, "tokenizer": "other"}, timeout_s=60)
        finally:
            await pool.close()
        return [known.score, other.status.value]

    assert "REWARD_SERVICE_LENGTH_TOKENIZERS" not in os.environ
    score, status = asyncio.run(go())
    assert score == pytest.approx(-0.4)  # 4 tokens of at most 10, linear ramp
    assert status == "invalid_reference"
