"""/docs and /redoc as a browser shows them: headless chromium against a real server, with every other host
unreachable, so the pages must render the service's OpenAPI 3.1 schema from assets the service serves itself."""
from __future__ import annotations

import re
from pathlib import Path

from tests.support.server import LiveServer, chromium_dom

# Operations a reader of the API page must find (paths of the schema; the full list is the schema's).
OPERATIONS = ("/v1/verify", "/v1/verifiers", "/v1/prm/score", "/v1/sandbox/run", "/healthz")


def rendered(url: str, profile: Path) -> str:
    """The DOM after the page's scripts ran, with no network but 127.0.0.1."""
    return chromium_dom(url, profile, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                        "--virtual-time-budget=20000", what="the API pages", timeout=180)


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
