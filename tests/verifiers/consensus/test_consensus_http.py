"""``consensus`` through the real server (uvicorn on loopback, worker pool): groups of one request, semi-supervised
mixes, abstentions with named statuses and null scores, weights from another verifier, refusals as 422."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.support.server import LiveServer


def item(response: str, group: str | None, reference: Any = None, **options: Any) -> dict[str, Any]:
    return {"verifier": "consensus", "response": response, "reference": reference, "group": group, "options": options}


def post(server: LiveServer, items: list[dict[str, Any]]) -> Any:
    with server.client() as client:
        return client.post("/v1/verify", json={"items": items})


def test_one_request_with_every_kind_of_group(server: LiveServer) -> None:
    items = [
        item("The answer is $\\frac{3}{4}$.", "spell"), item("so it is 0.75", "spell"),
        item("The answer is \\boxed{\\dfrac34}", "spell"), item("The answer is 4", "spell"),
        item("The answer is 10.", "tie"), item("The answer is 11.", "tie"),
        item("The answer is 10.", "tie"), item("The answer is \\boxed{11}", "tie"),
        item("The answer is 0.75", "lab", reference="3/4"), item("The answer is 1", "lab", reference="3/4"),
        item("The answer is 5.", "pair"), item("The answer is 5.", "pair"),
        item("The answer is 5.", None),
    ]
    response = post(server, items)
    assert response.status_code == 200, response.text
    body = response.json()
    results = body["results"]
    assert [r["score"] for r in results[:4]] == [1.0, 1.0, 1.0, 0.0]
    assert results[0]["details"]["pseudo_label"] == "\\frac{3}{4}" and results[0]["details"]["clusters"] == 2
    assert {r["status"] for r in results[4:8]} == {"no_consensus"} and all(r["score"] is None for r in results[4:8])
    assert [(r["score"], r["details"]["reward_source"]) for r in results[8:10]] == [(1.0, "reference"),
                                                                                   (0.0, "reference")]
    assert [r["status"] for r in results[10:]] == ["group_too_small"] * 3
    groups = body["groups"]
    assert groups["tie"]["null_count"] == 4 and groups["spell"]["mean"] == 0.75 and groups["pair"]["null_count"] == 2


def test_weights_from_a_verifier_and_a_backend_down(server: LiveServer) -> None:
    responses = ["The answer is 4."] * 3 + ["I double-checked it. The answer is 5."] * 2
    by = {"verifier": "regex", "reference": "double-checked"}
    results = post(server, [item(r, "w", weight_by=by) for r in responses]).json()["results"]
    assert [r["score"] for r in results] == [0.0] * 3 + [1.0] * 2
    down = post(server, [item(r, "d", weight_by={"verifier": "test_down"}) for r in responses]).json()["results"]
    assert {r["status"] for r in down} == {"unavailable"} and all(r["score"] is None for r in down)


def test_refusals_are_422(server: LiveServer) -> None:
    assert post(server, [item("4", "g", weight_by={"verifier": "nope"})]).status_code == 422
    assert post(server, [item("4", "g", correction="backward")]).status_code == 422
    assert post(server, [item("4", "g", threshold=-0.1)]).status_code == 422
    assert post(server, [item("4", "g", threshold=1.0)]).status_code == 422
    assert post(server, [item("4", "g", min_size=0)]).status_code == 422


def test_real_groups_through_the_server(server: LiveServer, shared_data: Path) -> None:
    """Real ProcessBench groups of 3+ responses in one request: abstentions are null with a named status, every
    group's items share its figures, and nothing consensus scores 1 is refused by math as a hedge."""
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in (shared_data / "math" / "processbench_answers.jsonl").read_text().splitlines():
        row = json.loads(line)
        by_problem[row["problem"]].append(row)
    groups = [rows for rows in by_problem.values() if len(rows) >= 3][-40:]
    rows = [r for rows in groups for r in rows]
    items = [item(r["response"], str(g)) for g, rs in enumerate(groups) for r in rs]
    results = post(server, items).json()["results"]
    statuses = {r["status"] for r in results}
    assert statuses <= {"ok", "no_consensus", "group_too_small", "rejected", "no_answer"} and "ok" in statuses
    assert all((r["score"] is None) == (r["status"] in ("no_consensus", "group_too_small")) for r in results)
    by_group: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    for it, r in zip(items, results):
        d = r["details"]
        by_group[it["group"]].add((d["pseudo_label"], d["share"], d["clusters"], d["entropy"], d["votes"]))
    assert all(len(v) == 1 for v in by_group.values())
    winners = [{"verifier": "math", "response": row["response"], "reference": row["reference"]}
               for row, r in zip(rows, results) if r["score"] == 1.0]
    with server.client() as client:
        checked = client.post("/v1/verify", json={"items": winners}).json()["results"]
    assert winners and not [c for c in checked if c["status"] == "rejected"]
