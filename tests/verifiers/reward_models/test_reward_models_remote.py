"""Reward models served by vLLM/SGLang: the remote path against a double that speaks their wire formats and runs
the same tiny random model the local path loads, so remote step scores must equal local ones for the same items.
Also: retries, a server that is down (unavailable, never 0), malformed answers (error with the reason), rejected
inputs, batching counted at the double, keys, and the whole HTTP service (/v1/prm/score and /v1/verify)."""
from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import LiveServer, free_port, run_server
from verifiers.kinds.reward_models.spec import ModelSpec

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.support.fakes.reward_model_server import Fault, RewardServerDouble, load_double, serve  # noqa: E402
from tests.support.reward_models import STEPWISE, build_model, model_env  # noqa: E402
from verifiers.engine import Engine  # noqa: E402
from verifiers.engine.registry import load_modules  # noqa: E402
from verifiers.kinds.reward_models.hub import MODELS, ModelHub  # noqa: E402
from verifiers.kinds.reward_models.loading import load_model  # noqa: E402
from verifiers.kinds.reward_models.remote import MalformedAnswer, RequestRejected, ServerUnavailable  # noqa: E402
from verifiers.types import Status, VerifyItem  # noqa: E402

ITEMS = [
    *STEPWISE,
    ("q", ["Шаг ки один <extra_0> planted", "два + три - четыре " * 12]),  # markers typed by the policy
]
ANSWERS = [("What is 2+2?", "It is 4."), ("Solve 3x + 5 = 20.", "x = 5 " * 30), ("q", "a")]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rm_remote")
    return {
        "prm": build_model(root / "prm", "token_classification", seed=21),
        "prm_chat": build_model(root / "prm_chat", "token_classification", seed=22, chat=True),
        "lm": build_model(root / "lm", "causal_lm", seed=23),
        "orm": build_model(root / "orm", "sequence_classification", seed=24, num_labels=1),
        "orm2": build_model(root / "orm2", "sequence_classification", seed=25, num_labels=2),
    }


def _local(spec: dict[str, Any]) -> Any:
    return load_model(ModelSpec(**{k: v for k, v in spec.items() if k not in ("backend", "url")}))


def _remote(spec: dict[str, Any], url: str, **extra: Any) -> ModelSpec:
    return ModelSpec(**spec, backend=extra.pop("backend", "vllm"), url=url, remote_model="rm", **extra)


def _token_id(path: Path, token: str) -> int:
    from transformers import AutoTokenizer

    return int(AutoTokenizer.from_pretrained(path).convert_tokens_to_ids(token))


async def _hub_steps(spec: ModelSpec, items: list, concurrent: bool = False) -> list:
    hub = ModelHub([spec])
    hub.start()
    try:
        await hub.wait_ready(60)
        if concurrent:  # one caller per item, as the verifier calls it
            return [r for part in await asyncio.gather(*(hub.score_steps(spec.name, [i]) for i in items))
                    for r in part]
        return await hub.score_steps(spec.name, items)
    finally:
        await hub.close()


async def _hub_responses(spec: ModelSpec, items: list) -> list:
    hub = ModelHub([spec])
    hub.start()
    try:
        await hub.wait_ready(60)
        return await hub.score_responses(spec.name, items)
    finally:
        await hub.close()


async def _prm_verdict(spec: ModelSpec) -> Any:
    """The ``prm`` verifier's verdict on a two-step response, through an engine whose hub holds ``spec``."""
    hub = ModelHub([spec])
    hub.start()
    await hub.wait_ready(60)
    try:
        engine = Engine(load_modules(["verifiers.kinds.reward_models"]), resources={MODELS: hub}, stages=())
        return await engine.verify(VerifyItem("prm", "a\n\nb", "p"))
    finally:
        await hub.close()


# --- equality with the local path ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["separator_step", "separator_all", "separator_chat", "step_tag"])
def test_vllm_pooling_step_scores_equal_local(dirs: dict[str, Path], case: str) -> None:
    spec: dict[str, Any] = {"name": "prm", "path": str(dirs["prm"]), "format": "separator", "max_wait_ms": 300}
    kind, kwargs = "token_classification", {}
    if case == "separator_chat":
        spec.update(path=str(dirs["prm_chat"]), system_prompt="Reason step by step.")
    if case == "step_tag":
        spec.update(path=str(dirs["lm"]), format="step_tag")
        kind = "causal_lm"
        kwargs = {"returned_token_ids": [_token_id(dirs["lm"], "+"), _token_id(dirs["lm"], "-")]}
    marker = "ки" if case == "step_tag" else "<extra_0>"
    if case != "separator_all":  # ALL pooling: every token's row comes back, read at the step positions
        kwargs["step_tag_id"] = _token_id(Path(spec["path"]), marker)
    local = _local(spec)
    want = local.run(local.encoder.encode_steps(ITEMS))
    with serve(load_double(spec["path"], kind, pooling="ALL" if case == "separator_all" else "STEP",
                           **kwargs)) as double:
        got = asyncio.run(_hub_steps(_remote(spec, double.url), ITEMS, concurrent=True))
    for g, w, (_, steps) in zip(got, want, ITEMS):
        assert not isinstance(g, BaseException), g
        assert len(g) == len(steps)
        assert g == pytest.approx(w, abs=1e-5)
    assert len({round(x, 4) for g in got for x in g}) > 3  # real contrast, not a constant
    # the four single-item callers were coalesced into fewer requests (300 ms of patience: room for a loaded
    # machine), and every input was sent once
    assert double.items("/pooling") == len(ITEMS) and len(double.requests) < len(ITEMS)


@pytest.mark.parametrize("backend,labels,activation", [
    ("vllm", 1, "none"), ("vllm", 1, "sigmoid"), ("vllm", 2, "none"), ("sglang", 1, "none"), ("sglang", 2, "none")])
def test_orm_scores_equal_local(dirs: dict[str, Path], backend: str, labels: int, activation: str) -> None:
    path = dirs["orm" if labels == 1 else "orm2"]
    spec = {"name": "orm", "path": str(path), "format": "sequence_classification", "orm_activation": activation}
    local = _local(spec)
    want = [r[0] for r in local.run(local.encoder.encode_responses(ANSWERS))]
    with serve(load_double(str(path), "sequence_classification", flavor=backend)) as double:
        got = asyncio.run(_hub_responses(_remote(spec, double.url, backend=backend), ANSWERS))
    assert got == pytest.approx(want, abs=1e-5)
    assert len({round(x, 5) for x in got}) == len(ANSWERS)
    assert double.requests == [("/classify", len(ANSWERS))]  # one request for the batch


def test_sglang_cannot_serve_a_prm() -> None:
    with pytest.raises(ValueError, match="SGLang"):
        ModelSpec(name="p", path="x", format="separator", backend="sglang", url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="url"):
        ModelSpec(name="p", path="x", backend="vllm")


def test_any_reply_is_scores_of_the_right_shape_or_a_named_failure() -> None:
    """Whatever a hostile or broken server sends back, parsing yields, per item, exactly one score per step or a
    MalformedAnswer; it never raises anything else and never invents or drops a step."""
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    from verifiers.kinds.reward_models.formats import Encoded
    from verifiers.kinds.reward_models.remote import parse_reply

    seqs = [Encoded([1, 2, 9, 3, 9], [2, 4]), Encoded([4, 9], [1])]
    numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6), st.booleans())
    leaf = st.one_of(numbers, st.text(max_size=3), st.none())
    json_like = st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.sampled_from(["data", "index", "probs", "embedding"]),
                                                     inner, max_size=4)), max_leaves=30)
    entry = st.fixed_dictionaries({"index": st.one_of(st.integers(-1, 3), json_like),
                                   "data": st.one_of(st.lists(st.lists(numbers, max_size=3), max_size=6), json_like)})
    replies = st.one_of(json_like, st.fixed_dictionaries({"data": st.lists(entry, max_size=3)}))
    specs = [ModelSpec(name="p", path="x", format=f, backend="vllm", url="http://h") for f in ("separator", "step_tag")]

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(reply=replies, which=st.integers(0, 1))
    @example(reply={"data": [{"index": 1, "data": [[1.0, 1.5]]}, {"index": 0, "data": [[0.1, 2.0], [3.0, -1.0]]}]},
             which=0)  # well formed, out of order: scored
    def check(reply: Any, which: int) -> None:
        try:
            out = parse_reply(specs[which], seqs, reply)
        except MalformedAnswer:
            return
        if reply == {"data": [{"index": 1, "data": [[1.0, 1.5]]}, {"index": 0, "data": [[0.1, 2.0], [3.0, -1.0]]}]}:
            assert out[1] == pytest.approx([0.6225], abs=1e-4) and len(out[0]) == 2
        assert len(out) == len(seqs)
        for seq, r in zip(seqs, out):
            if not isinstance(r, MalformedAnswer):
                assert isinstance(r, list) and len(r) == len(seq.positions)
                assert all(isinstance(x, float) and 0.0 <= x <= 1.0 for x in r)

    check()


# --- trouble ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def prm_double(dirs: dict[str, Path]) -> Iterator[RewardServerDouble]:
    with serve(load_double(str(dirs["prm"]), "token_classification",
                           step_tag_id=_token_id(dirs["prm"], "<extra_0>"), max_model_len=60)) as double:
        yield double


def _prm_spec(dirs: dict[str, Path], url: str, **extra: Any) -> ModelSpec:
    base = {"name": "prm", "path": str(dirs["prm"]), "format": "separator", "max_wait_ms": 5,
            "retry_backoff_s": 0.01}
    return _remote({**base, **extra}, url)


def _reset(double: RewardServerDouble) -> None:
    double.requests.clear()
    double.fail_next.clear()
    double.mangle = None
    double.delay_s = 0.0


def test_server_down_is_unavailable_never_zero(dirs: dict[str, Path]) -> None:
    spec = _prm_spec(dirs, f"http://127.0.0.1:{free_port()}", max_retries=2)
    got = asyncio.run(_hub_steps(spec, ITEMS[:2]))
    assert all(isinstance(g, ServerUnavailable) for g in got)
    assert "after 3 attempts" in str(got[0]) and "connection failed" in str(got[0])
    v = asyncio.run(_prm_verdict(spec))
    assert v.status is Status.UNAVAILABLE and v.score is None and "unavailable" in v.reason


def test_5xx_and_429_are_retried(dirs: dict[str, Path], prm_double: RewardServerDouble) -> None:
    _reset(prm_double)
    short = [(p, s) for p, s in ITEMS[:1]]
    want = asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url), short))
    _reset(prm_double)
    prm_double.fail_next.extend([Fault(500), Fault(429, retry_after="0"), Fault(503)])
    got = asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url, max_retries=3), short))
    assert got == want and not isinstance(got[0], BaseException)
    assert len(prm_double.requests) == 4  # three refusals, then the answer
    prm_double.fail_next.extend([Fault(500)] * 3)
    [down] = asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url, max_retries=2), short))
    assert isinstance(down, ServerUnavailable) and "HTTP 500" in str(down)


def test_malformed_answers_are_errors_with_the_reason(dirs: dict[str, Path], prm_double: RewardServerDouble) -> None:
    two = ITEMS[:3:2]  # 2 and 2 steps, both short

    def drop_a_step(body: Any) -> Any:
        body["data"][0]["data"] = body["data"][0]["data"][:-1]
        return body

    _reset(prm_double)
    prm_double.mangle = drop_a_step
    got = asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url), two))
    bad = [g for g in got if isinstance(g, BaseException)]
    assert len(bad) == 1 and isinstance(bad[0], MalformedAnswer)
    assert "returned 1 step scores for 2 steps" in str(bad[0])
    assert sum(isinstance(g, list) for g in got) == 1  # the other item is scored

    for mangle, reason in [(lambda b: {"object": "list"}, "no 'data' list"),
                           (lambda b: {**b, "data": b["data"][:1]}, "1 results for 2 inputs"),
                           (lambda b: {**b, "data": [{**d, "index": 0} for d in b["data"]]}, "duplicate"),
                           (lambda b: {**b, "data": [{**d, "data": [["x", 1]] * 2} for d in b["data"]]},
                            "list of numbers"),
                           (lambda b: {**b, "data": [{**d, "data": [[0.25, 0.75]] * 2} for d in b["data"]]},
                            "ignored use_activation")]:
        prm_double.mangle = mangle
        got = asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url), two))
        assert all(isinstance(g, MalformedAnswer) and reason in str(g) for g in got), (reason, got)
    prm_double.mangle = lambda b: {**b, "padding": "x" * 4096}
    got = asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url, max_reply_mb=0.002), two))
    assert all(isinstance(g, MalformedAnswer) and "over max_reply_mb" in str(g) for g in got), got
    prm_double.mangle = None
    assert all(isinstance(g, list) for g in asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url), two)))

    prm_double.mangle = drop_a_step
    v = asyncio.run(_prm_verdict(_prm_spec(dirs, prm_double.url)))
    assert v.status is Status.ERROR and v.score is None and "MalformedAnswer" in v.reason


def test_a_slow_server_times_out_and_closing_leaves_no_caller_waiting(
        dirs: dict[str, Path], prm_double: RewardServerDouble) -> None:
    _reset(prm_double)
    prm_double.delay_s = 1.0
    try:
        [late] = asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url, timeout_s=0.2, max_retries=1), ITEMS[:1]))
        assert isinstance(late, ServerUnavailable) and "no reply within 0.2s" in str(late)

        async def close_while_in_flight() -> list:
            hub = ModelHub([_prm_spec(dirs, prm_double.url)])
            hub.start()
            await hub.wait_ready(60)
            call = asyncio.ensure_future(hub.score_steps("prm", ITEMS[:2]))
            await asyncio.sleep(0.3)
            await hub.close()
            return await asyncio.wait_for(call, 5)

        got = asyncio.run(close_while_in_flight())
        assert all(isinstance(g, ServerUnavailable) and "shutting down" in str(g) for g in got)
    finally:
        prm_double.delay_s = 0.0


def test_a_rejected_input_fails_alone(dirs: dict[str, Path], prm_double: RewardServerDouble) -> None:
    _reset(prm_double)
    items = [ITEMS[0], ITEMS[3], ITEMS[2]]  # the middle one is over the double's 60 tokens
    got = asyncio.run(_hub_steps(_prm_spec(dirs, prm_double.url, max_retries=0), items))
    assert isinstance(got[1], RequestRejected) and "maximum context length" in str(got[1])
    assert isinstance(got[0], list) and isinstance(got[2], list)
    assert prm_double.requests[0] == ("/pooling", 3) and len(prm_double.requests) == 4  # batch, then one by one


def test_key_from_the_environment(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(load_double(str(dirs["prm"]), "token_classification", api_key="s3cret",
                           step_tag_id=_token_id(dirs["prm"], "<extra_0>"))) as double:
        monkeypatch.setenv("RM_KEY", "s3cret")
        ok = asyncio.run(_hub_steps(_prm_spec(dirs, double.url, api_key_env="RM_KEY"), ITEMS[:1]))
        assert isinstance(ok[0], list)
        monkeypatch.setenv("RM_KEY", "wrong")
        [refused] = asyncio.run(_hub_steps(_prm_spec(dirs, double.url, api_key_env="RM_KEY"), ITEMS[:1]))
        assert isinstance(refused, ServerUnavailable) and "HTTP 401" in str(refused)
        assert len(double.requests) == 2  # a refused key is not retried


def test_concurrency_and_request_size_are_bounded(dirs: dict[str, Path], prm_double: RewardServerDouble) -> None:
    _reset(prm_double)
    items = [ITEMS[0], ITEMS[2]] * 10
    spec = _prm_spec(dirs, prm_double.url, max_items_per_request=3, max_concurrency=2, max_wait_ms=50)
    got = asyncio.run(_hub_steps(spec, items, concurrent=True))
    assert all(isinstance(g, list) for g in got)
    assert prm_double.items() == 20 and max(n for _, n in prm_double.requests) <= 3
    assert len(prm_double.requests) >= 7


def test_processbench_through_vllm_equals_local(dirs: dict[str, Path], shared_data: Path) -> None:
    """Real ProcessBench solutions (unseen text: LaTeX, long steps) score the same through the server as locally,
    and prm-eval's metric comes out identical."""
    from reward_service.cli.prm_eval import evaluate

    data = shared_data / "prm"
    if not (data / "processbench_gsm8k.json").is_file():
        pytest.skip("ProcessBench data not found")
    spec = {"name": "prm", "path": str(dirs["prm"]), "format": "separator", "max_length": 1024, "max_wait_ms": 20}

    async def run(model_spec: ModelSpec) -> tuple[list, list]:
        hub = ModelHub([model_spec])
        hub.start()
        try:
            await hub.wait_ready(60)
            rows = await evaluate(hub, "prm", data, ["gsm8k", "math"], 0.5, 10)
            from verifiers.kinds.reward_models.processbench import load_subset

            items = [(x["problem"], list(x["steps"])) for sub in ("gsm8k", "math") for x in load_subset(data, sub, 10)]
            return rows, await hub.score_steps("prm", items)
        finally:
            await hub.close()

    local_rows, local_scores = asyncio.run(run(ModelSpec(**spec)))
    with serve(load_double(str(dirs["prm"]), "token_classification",
                           step_tag_id=_token_id(dirs["prm"], "<extra_0>"))) as double:
        remote_rows, remote_scores = asyncio.run(run(_remote(spec, double.url)))
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in local_rows]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in remote_rows] == strip
    assert sum(r["n_error"] + r["n_correct"] for r in local_rows) > 0
    scored = 0
    for got, want in zip(remote_scores, local_scores):
        assert isinstance(got, BaseException) == isinstance(want, BaseException)  # too long: refused alike
        if not isinstance(want, BaseException):
            assert got == pytest.approx(want, abs=1e-5)
            scored += 1
    assert scored >= 8  # the rest are over 1024 tokens for this tiny tokenizer, refused alike


# --- through the HTTP service ----------------------------------------------------------------------------------------
def test_http_service_with_a_vllm_backend(dirs: dict[str, Path], tmp_path: Path) -> None:
    prm = {"name": "rprm", "path": str(dirs["prm"]), "format": "separator", "max_wait_ms": 300}
    orm = {"name": "rorm", "path": str(dirs["orm"]), "format": "sequence_classification"}
    local_prm, local_orm = _local(prm), _local(orm)
    want = local_prm.run(local_prm.encoder.encode_steps(ITEMS[:3]))
    want_orm = local_orm.run(local_orm.encoder.encode_responses(ANSWERS[:1]))[0][0]
    prm_double = load_double(str(dirs["prm"]), "token_classification",
                             step_tag_id=_token_id(dirs["prm"], "<extra_0>"))
    orm_double = load_double(str(dirs["orm"]), "sequence_classification")
    with serve(prm_double), serve(orm_double):
        specs = [{**prm, "backend": "vllm", "url": prm_double.url, "remote_model": "rm", "max_retries": 1,
                  "retry_backoff_s": 0.01},
                 {**orm, "backend": "vllm", "url": orm_double.url, "remote_model": "rm"}]
        with run_server(tmp_path, model_env(specs)) as live:
            body = {"model": "rprm", "aggregation": "min",
                    "items": [{"id": str(i), "prompt": p, "steps": s} for i, (p, s) in enumerate(ITEMS[:3])]}
            r = _post(live, "/v1/prm/score", body)
            assert r.status_code == 200, r.text
            for res, w in zip(r.json()["results"], want):
                assert res["status"] == "ok" and res["step_scores"] == pytest.approx(w, abs=1e-5)
                assert res["score"] == pytest.approx(min(w), abs=1e-5)
            assert prm_double.items("/pooling") == 3 and len(prm_double.requests) < 3  # coalesced
            r = _post(live, "/v1/verify", {"items": [
                {"verifier": "orm", "response": ANSWERS[0][1], "reference": ANSWERS[0][0],
                 "options": {"model": "rorm"}},
                {"verifier": "prm", "response": "\n\n".join(ITEMS[0][1]), "reference": ITEMS[0][0],
                 "options": {"model": "rprm", "aggregation": "last"}}]})
            assert r.status_code == 200, r.text
            orm_v, prm_v = r.json()["results"]
            assert orm_v["status"] == "ok" and orm_v["score"] == pytest.approx(want_orm, abs=1e-5)
            assert prm_v["score"] == pytest.approx(want[0][-1], abs=1e-5)
            prm_double.fail_next.extend([Fault(503)] * 2)  # down for both attempts
            r = _post(live, "/v1/prm/score", {**body, "items": body["items"][:1]})
            assert r.status_code == 503 and "unavailable" in r.text
            prm_double.fail_next.extend([Fault(503)] * 2)
            r = _post(live, "/v1/verify", {"items": [
                {"verifier": "prm", "response": "a\n\nb", "reference": "p", "options": {"model": "rprm"}}]})
            [v] = r.json()["results"]
            assert v["status"] == "unavailable" and v["score"] is None, v


def _post(live: LiveServer, path: str, body: dict) -> httpx.Response:
    with live.client() as c:
        return c.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
