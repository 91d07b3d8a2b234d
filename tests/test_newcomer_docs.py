"""/docs and /redoc as a browser shows them: headless chromium against a real server, with every other host
unreachable, so the pages must render the service's OpenAPI 3.1 schema from assets the service serves itself."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LiveServer

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
# Operations a reader of the API page must find (paths of the schema; the full list is the schema's).
OPERATIONS = ("/v1/verify", "/v1/verifiers", "/v1/prm/score", "/v1/sandbox/run", "/healthz")


def rendered(url: str, profile: Path) -> str:
    """The DOM after the page's scripts ran, in a fresh profile (no cached bundle), with no network but 127.0.0.1."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it): cannot render the API pages")
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--virtual-time-budget=20000",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_swagger_ui_lists_the_operations(server: LiveServer, tmp_path: Path) -> None:
    dom = rendered(f"{server.url}/docs", tmp_path / "profile")
    assert "Unable to render this definition" not in dom
    paths = set(re.findall(r'data-path="([^"]+)"', dom))
    assert set(OPERATIONS) <= paths, sorted(paths)
    assert 'class="opblock-tag' in dom  # the operations are grouped by tag, as the schema says


def test_redoc_lists_the_operations(server: LiveServer, tmp_path: Path) -> None:
    dom = rendered(f"{server.url}/redoc", tmp_path / "profile")
    assert "Something went wrong" not in dom
    for path in OPERATIONS:
        assert f">{path}<" in dom, path
    with server.client() as c:
        html = c.get("/redoc").text
    assert "fonts.googleapis" not in html and "cdn.jsdelivr" not in html
