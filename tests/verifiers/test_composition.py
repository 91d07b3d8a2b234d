"""Reward specs, shaping verifiers and group statistics, through the library and the real server."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from reward_service.routes.verify import group_stats
from tests.support.reward_models import _tiny_tokenizer
from tests.support.server import LiveServer, run_server
from verifiers.kinds.shaping import (
    FormatVerifier,
    JsonSchemaVerifier,
    LengthVerifier,
    RepetitionVerifier,
    dapo_overlong_penalty,
    ramp_penalty,
)

THINK_SPEC = {
    "components": [
        {"name": "format", "verifier": "format", "options": {"template": "think"}, "gate": True,
         "use_reference": False},
        {"name": "correct", "verifier": "exact_match", "weight": 1.0, "reference_key": "answer"},
        {"name": "length", "verifier": "length", "weight": 0.5, "use_reference": False,
         "options": {"mode": "dapo", "max_length": 60, "cache_length": 20}},
    ]
}


def post(server: LiveServer, items: list[dict]) -> dict:
    with server.client() as c:
        r = c.post("/v1/verify", json={"items": items})
    assert r.status_code == 200, r.text
    return r.json()


# ---- pure shaping functions -------------------------------------------------------------------------------

def test_dapo_overlong_penalty_follows_the_paper() -> None:
    # 0 up to L_max - L_cache, linear to -1 at L_max, -1 beyond.
    assert dapo_overlong_penalty(80, 100, 20) == 0.0
    assert dapo_overlong_penalty(90, 100, 20) == pytest.approx(-0.5)
    assert dapo_overlong_penalty(95, 100, 20) == pytest.approx(-0.75)
    assert dapo_overlong_penalty(100, 100, 20) == -1.0
    assert dapo_overlong_penalty(500, 100, 20) == -1.0


def test_ramp_penalties() -> None:
    assert ramp_penalty(10, 10, 110, "linear") == 0.0
    assert ramp_penalty(60, 10, 110, "linear") == pytest.approx(-0.5)
    assert ramp_penalty(60, 10, 110, "cosine") == pytest.approx(-0.5)
    assert ramp_penalty(35, 10, 110, "cosine") == pytest.approx(-(1 - math.cos(math.pi / 4)) / 2)
    assert ramp_penalty(999, 10, 110, "cosine") == pytest.approx(-1.0)


@pytest.mark.parametrize("response, template, ok", [
    ("<think>reason</think> The answer is 4.", "think", True),
    ("<think>reason</think>", "think", False),
    ("The answer is 4.", "think", False),
    ("<think></think> 4", "think", False),
    ("<think>a</think><think>b</think> 4", "think", False),
    ("<think>a</think>\n<answer>4</answer>", "think_answer", True),
    ("<think>a</think>\n<answer>4</answer> trailing", "think_answer", False),
    ("so \\boxed{4}", "boxed", True),
])
def test_format_templates(response: str, template: str, ok: bool) -> None:
    v = FormatVerifier()
    assert v.check(response, None, v.parse_options({"template": template})).score == (1.0 if ok else 0.0)


def test_format_needs_exactly_one_rule() -> None:
    with pytest.raises(ValueError):
        FormatVerifier().parse_options({})
    with pytest.raises(ValueError):
        FormatVerifier().parse_options({"template": "think", "regex": ".*"})


def test_json_schema_verifier() -> None:
    v = JsonSchemaVerifier()
    schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    opts = v.parse_options({})
    assert v.check('```json\n{"name": "x"}\n```', schema, opts).score == 1.0
    bad = v.check('{"name": 3}', schema, opts)
    assert bad.score == 0.0 and "schema violation" in bad.reason
    assert v.check("{not json", None, opts).score == 0.0
    assert v.check("  ", None, opts).status.value == "no_answer"
    assert v.check('[1, 2]', None, v.parse_options({"schema": {"type": "array"}})).score == 1.0


def test_repetition_penalty() -> None:
    v = RepetitionVerifier()
    opts = v.parse_options({"n": 2})
    assert v.check("a b c d e f", None, opts).score == 0.0
    looped = v.check("a b a b a b a b", None, opts)  # 7 bigrams, 2 distinct
    assert looped.score == pytest.approx(-(1 - 2 / 7))


def test_length_units() -> None:
    v = LengthVerifier()
    words = v.check("one two three four", None, v.parse_options({"mode": "linear", "max_length": 8, "unit": "words"}))
    assert words.details["length"] == 4 and words.score == pytest.approx(-0.5)


def test_group_stats() -> None:
    stats = group_stats(["a", "a", "b", "b", None, "c", "c"], [1.0, 0.0, 1.0, 1.0, 0.5, None, 1.0])
    assert stats["a"] == {"count": 2, "null_count": 0, "mean": 0.5, "std": 0.5, "all_equal": False}
    assert stats["b"]["all_equal"] is True and stats["b"]["std"] == 0.0
    assert stats["c"]["null_count"] == 1 and stats["c"]["all_equal"] is False and stats["c"]["mean"] == 1.0
    assert set(stats) == {"a", "b", "c"}


# ---- through the real server ------------------------------------------------------------------------------

def test_inline_spec_returns_total_and_component_vector(server: LiveServer) -> None:
    good = "<think>2+2</think> 4"
    items = [
        {"id": "good", "verifier": "spec", "response": good, "reference": {"answer": good}, "options": THINK_SPEC},
        {"id": "noformat", "verifier": "spec", "response": "4", "reference": {"answer": "4"}, "options": THINK_SPEC},
        {"id": "long", "verifier": "spec", "response": "<think>" + "x" * 37 + "</think> 4",
         "reference": {"answer": "nope"}, "options": THINK_SPEC},
    ]
    results = {r["id"]: r for r in post(server, items)["results"]}
    g = results["good"]
    assert g["status"] == "ok" and g["score"] == pytest.approx(1.0)
    assert set(g["details"]["components"]) == {"format", "correct", "length"}
    assert g["details"]["components"]["correct"]["score"] == 1.0
    assert g["details"]["components"]["length"]["score"] == 0.0
    nf = results["noformat"]
    assert nf["score"] == 0.0 and nf["details"]["components"]["correct"]["score"] == 1.0  # gate multiplies
    assert nf["details"]["components"]["format"]["score"] == 0.0
    lg = results["long"]  # 54 chars: dapo penalty (40 - 54) / 20 = -0.7, weight 0.5; wrong answer
    assert lg["details"]["components"]["length"]["score"] == pytest.approx(-0.7)
    assert lg["score"] == pytest.approx(0.5 * -0.7)


def test_null_component_nulls_the_total_unless_told(server: LiveServer) -> None:
    comps = [
        {"name": "rule", "verifier": "exact_match"},
        {"name": "judge", "verifier": "test_down", "use_reference": False},
    ]
    skip = [comps[0], {**comps[1], "on_null": "skip"}]
    zero = [comps[0], {**comps[1], "on_null": "zero", "weight": 2.0}]
    items = [
        {"id": "null", "verifier": "spec", "response": "a", "reference": "a", "options": {"components": comps}},
        {"id": "skip", "verifier": "spec", "response": "a", "reference": "a", "options": {"components": skip}},
        {"id": "zero", "verifier": "spec", "response": "a", "reference": "a",
         "options": {"components": zero, "normalize": True}},
    ]
    r = {x["id"]: x for x in post(server, items)["results"]}
    assert r["null"]["score"] is None and r["null"]["status"] == "unavailable"
    assert "judge" in r["null"]["reason"]
    assert r["null"]["details"]["components"]["rule"]["score"] == 1.0
    assert r["skip"]["score"] == 1.0 and r["skip"]["status"] == "ok"
    assert r["zero"]["score"] == pytest.approx(1.0 / 3.0)


def test_inline_spec_with_unknown_component_is_422(server: LiveServer) -> None:
    with server.client() as c:
        r = c.post("/v1/verify", json={"items": [{"verifier": "spec", "response": "a", "options": {
            "components": [{"name": "x", "verifier": "nope"}]}}]})
        assert r.status_code == 422 and "nope" in r.json()["detail"]
        r = c.post("/v1/verify", json={"items": [{"verifier": "spec", "response": "a", "options": {
            "components": [{"name": "x", "verifier": "length", "options": {"max_length": -1}}]}}]})
        assert r.status_code == 422


def test_groups_in_response(server: LiveServer) -> None:
    items = [{"verifier": "exact_match", "response": r, "reference": "4", "group": g}
             for g, r in [("p1", "4"), ("p1", "5"), ("p1", "4"), ("p2", "4"), ("p2", "4")]]
    body = post(server, items)
    assert body["groups"]["p1"]["mean"] == pytest.approx(2 / 3)
    assert body["groups"]["p1"]["all_equal"] is False
    assert body["groups"]["p2"] == {"count": 2, "null_count": 0, "mean": 1.0, "std": 0.0, "all_equal": True}
    plain = post(server, [{"verifier": "exact_match", "response": "4", "reference": "4"}])
    assert plain["groups"] is None


def test_named_spec_and_token_lengths(tmp_path: Path) -> None:
    tok_dir = tmp_path / "tok"
    _tiny_tokenizer(tok_dir)
    spec = {"math_like": {"components": [
        {"name": "correct", "verifier": "exact_match"},
        {"name": "length", "verifier": "length", "weight": 1.0, "use_reference": False,
         "options": {"mode": "linear", "max_length": 10, "unit": "tokens", "tokenizer": "tiny"}},
    ]}}
    env = {"REWARD_SERVICE_REWARD_SPECS": json.dumps(spec),
           "REWARD_SERVICE_LENGTH_TOKENIZERS": json.dumps({"tiny": str(tok_dir)}), "REWARD_SERVICE_WORKERS": "1"}
    with run_server(tmp_path, env) as live:
        with live.client() as c:
            names = [v["name"] for v in c.get("/v1/verifiers").json()["verifiers"]]
        assert "spec:math_like" in names
        text = "the answer is four"  # 4 tokens -> linear penalty -0.4
        res = post(live, [{"verifier": "spec:math_like", "response": text, "reference": text}])["results"][0]
        assert res["details"]["components"]["length"]["score"] == pytest.approx(-0.4)
        assert res["score"] == pytest.approx(0.6)
        unknown = post(live, [{"verifier": "length", "response": "x",
                               "options": {"max_length": 5, "unit": "tokens", "tokenizer": "other"}}])
        assert unknown["results"][0]["status"] == "invalid_reference"


def test_invalid_named_spec_fails_at_startup(tmp_path: Path) -> None:
    env = {"REWARD_SERVICE_REWARD_SPECS": json.dumps({"bad": {"components": [{"name": "x", "verifier": "nope"}]}}),
           "REWARD_SERVICE_WORKERS": "1"}
    with pytest.raises(RuntimeError, match="nope"):
        with run_server(tmp_path, env, ready_timeout=60):
            pass
