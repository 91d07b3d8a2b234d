"""The README's environments step, run as written (its bash block, aimed at a live server): the step's value and the
episode's reward are what its comments say."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from tests.support.server import ROOT, LiveServer


def environments_block() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## A 5-minute tour")
    section = text[start:text.index("\n## ", start + 1)]
    (block,) = [b for b in re.findall(r"^```bash\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)
                if "/envs/python/reset" in b]
    return block


def test_the_readme_environment_step_runs_as_written(env_server: LiveServer) -> None:
    block = environments_block().replace("localhost:8000", env_server.url.removeprefix("http://"))
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
    done = subprocess.run(["bash", "-c", block], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    answers, at, text = [], 0, done.stdout.strip()
    while at < len(text):  # the two answers, back to back (curl prints no newline)
        value, at = json.JSONDecoder().raw_decode(text, at)
        answers.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    step, end = answers
    assert step["observation"]["status"] == "ok" and step["observation"]["value"] == "120" and step["done"] is False
    assert end["observation"]["verdict"]["status"] == "ok" and end["reward"] == 1.0 and end["done"] is True
    comments = " ".join(line for line in block.splitlines() if line.startswith("#"))
    assert '"value": "120"' in comments and '"reward": 1.0' in comments
