"""The rule-reward kinds through the real server (127.0.0.1) and its worker pool, embeddings from a tiny local model
configured like the length tokenizers, and malformed references named per item."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.reward_models import build_embedding_model
from tests.support.rules import KINDS, rule_items
from tests.support.server import LiveServer, run_server

pytest.importorskip("sacrebleu")
pytest.importorskip("pycocotools")


@pytest.fixture(scope="module")
def rules_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    model = build_embedding_model(tmp_path_factory.mktemp("embedder") / "tiny")
    env = {"REWARD_SERVICE_EMBEDDING_MODELS": json.dumps({"tiny": str(model)})}
    with run_server(tmp_path_factory.mktemp("rules"), env=env) as live:
        yield live


# Workers load torch and the embedding model as they start; on a busy machine that outlasts the default deadline.
SLOW_START = {"timeout_s": 120}


def test_every_kind_in_one_batch(rules_server: LiveServer) -> None:
    items = [{**item, "options": {**item.get("options", {}), **SLOW_START}}
             for kind in KINDS for item in rule_items(kind, 6)]
    results = rules_server.verify(items)
    assert len(results) == len(items)
    for item, result in zip(items, results):
        assert result["verifier"] == item["verifier"]
        assert result["status"] in ("ok", "rejected"), result
        assert 0.0 <= result["score"] <= 1.0
    by_kind = {k: [r["score"] for i, r in zip(items, results) if i["verifier"] == k] for k in KINDS}
    for kind in ("grounding", "gui_action", "temporal_grounding", "qa"):
        right, wrong = by_kind[kind][1::2], by_kind[kind][0::2]
        assert min(right) > max(wrong), (kind, by_kind[kind])


def test_embedding_similarity_and_its_errors(rules_server: LiveServer) -> None:
    base = {"verifier": "text_similarity", "reference": ["the answer is four"]}
    results = rules_server.verify([
        {**base, "response": "the answer is four", "options": {"metric": "embedding", **SLOW_START}},
        {**base, "response": "so on and so on", "options": {"metric": "embedding", "model": "tiny", **SLOW_START}},
        {**base, "response": "the answer is four", "options": {"metric": "embedding", "model": "missing",
                                                               **SLOW_START}},
        {**base, "response": "", "options": {"metric": "embedding", **SLOW_START}},
    ])
    assert results[0]["status"] == "ok" and results[0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert results[1]["status"] == "ok" and results[1]["score"] < results[0]["score"]
    assert results[2]["status"] == "invalid_reference" and "missing" in results[2]["reason"]
    assert results[3]["status"] == "no_answer"


def test_a_bad_reference_is_named_and_the_batch_goes_on(rules_server: LiveServer) -> None:
    results = rules_server.verify([
        {"verifier": "grounding", "response": "[0, 0, 10, 10]", "reference": {"boxes": [[5, 5, 1, 1]]}},
        {"verifier": "ranking", "response": "[1] > [2]", "reference": {"relevance": {"1": -3}}},
        {"verifier": "qa", "response": "<answer>Paris</answer>", "reference": ["Paris"]},
    ])
    assert [r["status"] for r in results] == ["invalid_reference", "invalid_reference", "ok"]
    assert results[2]["score"] == 1.0


def test_bad_options_are_a_422_naming_the_item(rules_server: LiveServer) -> None:
    with rules_server.client() as client:
        r = client.post("/v1/verify", json={"items": [
            {"verifier": "qa", "response": "x", "reference": ["x"]},
            {"verifier": "grounding", "response": "x", "reference": [[0, 0, 1, 1]], "options": {"coords": "inches"}},
        ]})
    assert r.status_code == 422
    assert "1" in r.text and "coords" in r.text
