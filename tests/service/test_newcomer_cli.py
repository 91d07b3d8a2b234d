"""The command line as a newcomer reads it: every --help at 80 columns, and a labelled audit with nothing to show."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import ROOT

COMMANDS = ["", "serve", "serve-ray", "verify", "score", "prm-eval", "audit", "audit labelled", "audit probes",
            "audit diff"]
FLAGS = {"score": ["--overwrite", "--ray", "--allow-missing-fields"], "audit labelled": ["--store"],
         "prm-eval": ["--json"]}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "REWARD_SERVICE_LOG_LEVEL": "WARNING",
                **(env or {})}
    return subprocess.run([sys.executable, "-m", "reward_service", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=300)


def option_blocks(help_text: str) -> dict[str, str]:
    """Each option's lines of a help page, by its long name."""
    blocks: dict[str, str] = {}
    current = None
    for line in help_text.splitlines():
        start = re.match(r"  (?:-\w, )?(--[\w-]+)", line)
        if start:
            current = start.group(1)
            blocks[current] = line
        elif current and line.startswith("    "):
            blocks[current] += " " + line.strip()
        else:
            current = None
    return blocks


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_readable_at_80_columns(command: str) -> None:
    done = cli(*command.split(), "--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "…" not in text, "an option name or value was cut short"
    assert "<bool>" not in text, "a flag reads as if it took a value"
    blocks = option_blocks(text)
    assert "--help" in blocks
    for name, block in blocks.items():
        assert len(re.findall(r"default", block, re.IGNORECASE)) <= 1, f"{name} gives two defaults: {block}"
    for flag in FLAGS.get(command, []):
        assert re.search(rf"^  {flag}\s{{2,}}\S", text, re.MULTILINE), f"{flag} shows a value label: {text}"
    if command == "score":
        for option in ("--verifier-field", "--response-field", "--reference-field", "--allow-missing-fields"):
            assert option in blocks  # the flags the README's tour uses, whole


def test_labelled_audit_with_no_disagreement_says_so(tmp_path: Path) -> None:
    rows = [{"response": "Paris", "reference": "paris", "label": 1}, {"response": "Rome", "reference": "paris",
                                                                       "label": 0}]
    inp = tmp_path / "labelled.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = cli("audit", "labelled", "--verifier", "exact_match", "--input", str(inp), "--out", str(tmp_path / "r"),
               "--workers", "1")
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    section = html[html.index("<h2>Disagreements (0)</h2>"):]
    assert section.split("<h2>")[1].count("<table>") == 0, "an empty table of headers"
    assert 'id="no-disagreements"' in section and "None: every scored verdict agrees with its label." in section


def test_audit_diff_with_no_disagreement_says_so(tmp_path: Path) -> None:
    rows = [{"response": "Paris", "reference": "paris"}, {"response": "Rome", "reference": "paris"}]
    inp = tmp_path / "rows.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = cli("audit", "diff", str(inp), "--verifier", "exact_match", "--against", "exact_match",
               "--out", str(tmp_path / "d"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "d" / "report.html").read_text()
    section = html[html.index("<h2>Disagreements (0)</h2>"):]
    assert 'id="no-disagreements"' in section and "None: both verifiers give the same verdict" in section


def test_version_is_printed() -> None:
    from reward_service import __version__

    done = cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"reward-service {__version__}"


def test_serve_help_names_every_environment_setting() -> None:
    from reward_service.settings import ENV_PREFIX, FLAT_NAMES

    text = cli("serve", "--help").stdout
    for flat in FLAT_NAMES:
        assert re.search(rf"(?<![A-Z_]){ENV_PREFIX}{flat.upper()}(?![A-Z_])", text), flat


@pytest.mark.parametrize("command", ["", "audit"])
def test_command_summaries_are_whole_at_80_columns(command: str) -> None:
    """Each command's first sentence, wrapped, never cut short with "..."."""
    text = cli(*command.split(), "--help").stdout
    listing = text[text.index("Commands:"):]
    assert "..." not in listing, listing
    entries = re.findall(r"^  (\S+)\s+(.*(?:\n {4,}\S.*)*)", listing, re.MULTILINE)
    assert entries, listing
    for name, summary in entries:
        assert " ".join(summary.split()).endswith((".", "!", "?")), (name, summary)


def test_the_log_says_ready_when_readyz_does(tmp_path: Path) -> None:
    """With warm sandboxes still starting, the log first names what /readyz waits for, then says "ready"."""
    import time

    from tests.support.server import run_server

    with run_server(tmp_path, env={"REWARD_SERVICE_LOG_LEVEL": "INFO"}) as server:
        deadline = time.monotonic() + 10
        while "ready on" not in server.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        log = server.log()
    assert "ready on" in log, log
    waited = log.find("not ready yet")
    assert waited == -1 or waited < log.index("ready on"), log
