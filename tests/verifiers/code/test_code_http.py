"""The code verifier over HTTP on the real server (its lifespan opens the real sandbox)."""
from __future__ import annotations

import shutil

import pytest

from tests.support.server import LiveServer

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

REF = {"test_list": ["assert sq(2) == 4", "assert sq(3) == 9"]}


def test_batch_with_mixed_outcomes_and_a_bad_item(server: LiveServer) -> None:
    items = [
        {"verifier": "code", "response": "```python\ndef sq(x):\n    return x * x\n```", "reference": REF},
        {"verifier": "code", "response": "def sq(x):\n    return 4\n", "reference": REF},
        {"verifier": "code", "response": "import sys\nsys.exit(0)\n", "reference": REF},
        {"verifier": "code", "response": "def sq(x): return x*x", "reference": {"test_list": []}},
        {"verifier": "code", "response": "no code here", "reference": {"cases": [{"input": "", "output": "1"}]},
         "options": {"stop_on_first_failure": True}},
    ]
    with server.client() as client:
        r = client.post("/v1/verify", json={"items": items})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["score"] for x in results[:3]] == [1.0, 0.5, 0.0]
    assert [t["status"] for t in results[1]["details"]["tests"]] == ["passed", "failed"]
    assert results[3]["status"] == "invalid_reference" and results[3]["score"] is None
    assert results[4]["status"] == "ok" and results[4]["details"]["tests"][0]["status"] in ("failed", "error")


def test_unknown_option_is_a_4xx(server: LiveServer) -> None:
    with server.client() as client:
        r = client.post("/v1/verify", json={"items": [{"verifier": "code", "response": "x", "reference": REF,
                                                       "options": {"no_such_option": 1}}]})
    assert r.status_code == 422 and "no_such_option" in r.json()["detail"]
