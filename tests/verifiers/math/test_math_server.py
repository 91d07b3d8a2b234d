"""The math verifier through the real server: mixed batches, named statuses, and pathological answers that must
come back as a verdict or ``timeout`` within the deadline while the server keeps serving."""
from __future__ import annotations

import time

from tests.support.server import LiveServer


def post(server: LiveServer, items: list[dict]) -> list[dict]:
    with server.client() as c:
        r = c.post("/v1/verify", json={"items": items})
    assert r.status_code == 200, r.text
    return r.json()["results"]


def test_math_batch_statuses_over_http(server: LiveServer) -> None:
    items = [
        {"id": "right", "verifier": "math", "response": r"so $\boxed{\frac{12}{36}}$", "reference": r"\frac{1}{3}"},
        {"id": "wrong", "verifier": "math", "response": r"\boxed{\frac{1}{2004!}}", "reference": r"\frac{1}{2006!}"},
        {"id": "hedge", "verifier": "math", "response": "The answers are 1331 and 1728", "reference": "1728"},
        {"id": "hack", "verifier": "math", "response": "Thought process:", "reference": "5"},
        {"id": "none", "verifier": "math", "response": r"\boxed{}", "reference": "5"},
        {"id": "badref", "verifier": "math", "response": r"\boxed{5}", "reference": "}{"},
        {"id": "num", "verifier": "math", "response": r"\boxed{27}", "reference": 27.0},
        {"id": "plain", "verifier": "math", "response": "Answer: pi/2", "reference": r"\dfrac{\pi}{2}"},
    ]
    by_id = {r["id"]: r for r in post(server, items)}
    expect = {
        "right": ("ok", 1.0), "wrong": ("ok", 0.0), "hedge": ("rejected", 0.0), "hack": ("rejected", 0.0),
        "none": ("no_answer", 0.0), "badref": ("invalid_reference", None), "num": ("ok", 1.0), "plain": ("ok", 1.0),
    }
    for key, (status, value) in expect.items():
        assert (by_id[key]["status"], by_id[key]["score"]) == (status, value), by_id[key]
        assert by_id[key]["reason"]
    assert by_id["right"]["details"]["method"] == "numeric"
    assert by_id["right"]["details"]["extraction"] == "boxed"
    assert by_id["plain"]["details"]["method"] == "symbolic"


def test_bad_math_options_are_422(server: LiveServer) -> None:
    with server.client() as c:
        r = c.post("/v1/verify", json={"items": [
            {"verifier": "math", "response": "1", "reference": "1", "options": {"rel_tol": "lots"}}]})
    assert r.status_code == 422
    assert "rel_tol" in r.text


def test_pathological_answers_finish_within_the_deadline(server: LiveServer) -> None:
    deadline = 3.0
    monsters = [r"10^{10^{10^{10}}}", "(" + "9" * 200 + ")!", r"(10^{200})!", r"2^{2^{2^{2^{2^{2}}}}}",
                r"\frac{1}{(10^{10^{10}})!}", "9" * 5000]
    items = [
        {"id": str(k), "verifier": "math", "response": rf"\boxed{{{m}}}", "reference": ref,
         "options": {"timeout_s": deadline}}
        for k, m in enumerate(monsters) for ref in ("5", r"\frac{1}{2}", m)
    ]
    started = time.monotonic()
    results = post(server, items)
    elapsed = time.monotonic() - started
    assert elapsed < deadline * len(items) / 2 + 5  # two workers; nothing may hang beyond its own deadline
    for r in results:
        assert r["status"] in ("ok", "timeout", "invalid_reference", "no_answer"), r
        if r["status"] == "ok":
            assert r["score"] in (0.0, 1.0)
    # The server keeps serving correct verdicts afterwards.
    again = post(server, [{"verifier": "math", "response": r"\boxed{\sqrt{8}}", "reference": r"2\sqrt{2}"}] * 4)
    assert [r["score"] for r in again] == [1.0] * 4
