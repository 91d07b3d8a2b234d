"""Settings precedence (defaults < YAML/TOML file < environment < CLI flags) and the one-off `verify` command."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from reward_service.settings import Settings, load_settings
from tests.support.server import ROOT


def test_defaults_are_safe() -> None:
    s = Settings()
    assert s.server.host == "127.0.0.1" and s.auth.token is None and s.server.port == 8000


@pytest.mark.parametrize("suffix, text", [
    (".yaml", "port: 9100\nitem_timeout_s: 3.5\nmax_batch_items: 7\n"),
    (".toml", "port = 9100\nitem_timeout_s = 3.5\nmax_batch_items = 7\n"),
])
def test_config_file_then_environment_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str,
                                                 text: str) -> None:
    path = tmp_path / f"settings{suffix}"
    path.write_text(text)
    s = load_settings(path)
    assert (s.server.port, s.execution.item_timeout_s, s.limits.max_batch_items) == (9100, 3.5, 7)
    monkeypatch.setenv("REWARD_SERVICE_MAX_BATCH_ITEMS", "11")
    s = load_settings(path)
    assert s.limits.max_batch_items == 11 and s.server.port == 9100  # environment beats the file
    assert load_settings(path, port=9200).server.port == 9200  # a CLI flag beats both
    monkeypatch.setenv("REWARD_SERVICE_CONFIG", str(path))
    assert load_settings().server.port == 9100  # the file can also come from the environment


def test_unknown_setting_in_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("prot: 1\n")
    with pytest.raises(ValidationError, match="prot"):
        load_settings(path)


def test_secret_is_not_shown_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARD_SERVICE_AUTH_TOKEN", "hunter2-token")
    s = load_settings()
    assert s.auth.token is not None and s.auth.token.get_secret_value() == "hunter2-token"
    assert "hunter2-token" not in repr(s) and "hunter2-token" not in str(s.model_dump())


def run_verify(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REWARD_SERVICE_LOG_LEVEL": "WARNING"}
    return subprocess.run([sys.executable, "-m", "reward_service", "verify", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def test_cli_verify_prints_the_verdict() -> None:
    r = run_verify("--verifier", "exact_match", "--response", " Paris ", "--reference", "paris")
    assert r.returncode == 0, r.stderr
    verdict = json.loads(r.stdout)
    assert verdict["status"] == "ok" and verdict["score"] == 1.0
    r = run_verify("--verifier", "regex", "--response", "abc", "--reference", "(unclosed")
    assert r.returncode == 1  # no score: the shell sees a failure
    assert json.loads(r.stdout)["status"] == "invalid_reference"
    r = run_verify("--verifier", "multiple_choice", "--response", "so (B)", "--reference", "B",
                   "--options", '{"choices": "ABCD"}')
    assert json.loads(r.stdout)["score"] == 1.0


def test_cli_verify_bad_input_is_a_usage_error() -> None:
    r = run_verify("--verifier", "no_such", "--response", "x")
    assert r.returncode == 2 and "no_such" in r.stderr and "Traceback" not in r.stderr
    r = run_verify("--verifier", "exact_match", "--response", "x", "--options", '{"bogus": 1}')
    assert r.returncode == 2 and "bogus" in r.stderr and "Traceback" not in r.stderr
