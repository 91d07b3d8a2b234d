"""Reward-model library: step splitting, aggregation and ProcessBench math by hand, input layouts, and batched
scoring on tiny random Qwen2 models loaded through the real loading code."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from verifiers.kinds.reward_models.aggregate import aggregate, first_error, step_rewards
from verifiers.kinds.reward_models.batcher import Batcher, ModelOutOfMemory, is_out_of_memory, plan_batches
from verifiers.kinds.reward_models.processbench import processbench_metric
from verifiers.kinds.reward_models.steps import split_steps

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.support.reward_models import STEPWISE, build_model  # noqa: E402
from verifiers.kinds.reward_models.hub import ModelHub  # noqa: E402
from verifiers.kinds.reward_models.loading import load_model  # noqa: E402
from verifiers.kinds.reward_models.spec import ModelSpec  # noqa: E402

PROBLEMS = [
    *STEPWISE,
    ("Area of a right triangle with legs 6 and 8?", ["Area = 1/2 * 6 * 8 = 24."]),
    ("q", ["Шаг ки один", "два + три - четыре " * 12]),
]


# --- steps -----------------------------------------------------------------------------------------------------
def test_split_rules() -> None:
    text = "Step 1: add.\nStill step one.\n\nStep 2: multiply.\n\n\n  \nStep 3: done."
    assert split_steps(text, "blank_lines") == ["Step 1: add.\nStill step one.", "Step 2: multiply.", "Step 3: done."]
    assert split_steps(text, "newline") == ["Step 1: add.", "Still step one.", "Step 2: multiply.", "Step 3: done."]
    prefixed = "Let us think.\nStep 1: a = 2\nso b = 3 Step 2 is next\nStep 2. c = a + b\n**Step 3:** c = 5"
    assert split_steps(prefixed, "step_prefix") == [
        "Let us think.", "Step 1: a = 2\nso b = 3 Step 2 is next", "Step 2. c = a + b", "**Step 3:** c = 5"]
    assert split_steps(prefixed, "auto") == split_steps(prefixed, "step_prefix")
    assert split_steps("one\n\ntwo", "auto") == ["one", "two"]
    assert split_steps("one\ntwo", "auto") == ["one", "two"]
    assert split_steps("  \n\n ", "blank_lines") == []
    assert split_steps("no markers here", "step_prefix") == ["no markers here"]


# --- aggregation (hand-computed) ---------------------------------------------------------------------------------
def test_aggregations_by_hand() -> None:
    s = [0.9, 0.4, 0.8, 0.6]
    assert aggregate(s, "min") == 0.4
    assert aggregate(s, "prod") == pytest.approx(0.9 * 0.4 * 0.8 * 0.6)
    assert aggregate(s, "mean") == pytest.approx(2.7 / 4)
    assert aggregate(s, "last") == 0.6
    assert aggregate(s, "sum") == pytest.approx(2.7)
    # clip, eta 0.5: min(s - 0.5, 0) = [0, -0.1, 0, 0]
    assert step_rewards(s, "clip", 0.5) == pytest.approx([0.0, -0.1, 0.0, 0.0])
    assert aggregate(s, "clip", 0.5) == pytest.approx(-0.1)
    assert aggregate(s, "clip", 0.85) == pytest.approx(0 - 0.45 - 0.05 - 0.25)
    # delta: [0.9-0.4, 0.4-0.8, 0.8 (last scored step before the final), 0 (final step left to the outcome)]
    assert step_rewards(s, "delta") == pytest.approx([0.5, -0.4, 0.8, 0.0])
    assert aggregate(s, "delta") == pytest.approx(0.9)
    assert step_rewards([0.7], "delta") == [0.0]
    assert step_rewards(s, "min") is None
    with pytest.raises(ValueError):
        aggregate([], "min")


def test_bounded_aggregations_resist_repeated_steps() -> None:
    honest = [0.9, 0.8]
    padded = [0.9] * 20 + [0.8]  # the hack: repeat a good step many times
    assert aggregate(padded, "sum") > aggregate(honest, "sum")
    for how in ("clip", "delta", "min", "prod"):  # mean, like sum, can be raised by padding
        assert aggregate(padded, how) <= aggregate(honest, how) + 1e-9, how


def test_first_error() -> None:
    assert first_error([0.9, 0.7, 0.3, 0.1]) == 2
    assert first_error([0.9, 0.7]) is None
    assert first_error([0.9, 0.7], threshold=0.8) == 1
    assert first_error([]) is None


# --- ProcessBench metric (hand-computed) ------------------------------------------------------------------------
def test_processbench_metric_by_hand() -> None:
    labels = [2, 0, 3, -1, -1, -1, 1]
    preds = [2, 1, 3, -1, 0, -1, -1]
    m = processbench_metric("x", labels, preds)
    assert (m.n_error, m.n_correct) == (4, 3)
    assert m.error_acc == pytest.approx(2 / 4)
    assert m.correct_acc == pytest.approx(2 / 3)
    assert m.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert processbench_metric("x", [1, -1], [0, 3]).f1 == 0.0
    only_correct = processbench_metric("x", [-1, -1], [-1, 2])
    assert only_correct.error_acc is None and only_correct.f1 is None and only_correct.correct_acc == 0.5
    with pytest.raises(ValueError):
        processbench_metric("x", [1], [])


# --- batch planning and OOM classification -----------------------------------------------------------------------
def test_plan_batches_respects_budget_and_sorts() -> None:
    lengths = [5, 100, 7, 60, 6, 99, 8, 400]
    plan = plan_batches(lengths, max_tokens=200, max_size=3)
    assert sorted(i for b in plan for i in b) == list(range(len(lengths)))
    for b in plan:
        assert len(b) <= 3
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= 200
    assert plan[0] == [7]  # longer than the budget: alone
    assert [lengths[i] for i in plan[1]] == [100, 99]  # similar lengths together


def test_is_out_of_memory() -> None:
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert is_out_of_memory(RuntimeError("CUDA error: out of memory"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


# --- real tiny models ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rm")
    return {
        "tokcls": build_model(root / "tokcls", "token_classification", seed=1),
        "tokcls_chat": build_model(root / "tokcls_chat", "token_classification", seed=2, chat=True),
        "lm": build_model(root / "lm", "causal_lm", seed=3),
        "orm": build_model(root / "orm", "sequence_classification", seed=4, num_labels=1),
    }


SPECS = {
    "separator": ("tokcls", {"format": "separator"}),
    "separator_chat": ("tokcls_chat", {"format": "separator", "system_prompt": "Reason step by step."}),
    "token_classification": ("tokcls", {"format": "token_classification"}),
    "step_tag": ("lm", {"format": "step_tag"}),
}


def _spec(model_dirs: dict[str, Path], key: str, **extra: object) -> ModelSpec:
    d, fields = SPECS[key] if key in SPECS else ("orm", {"format": "sequence_classification"})
    return ModelSpec(name=key, path=str(model_dirs[d]), **{**fields, **extra})


@pytest.mark.parametrize("key", list(SPECS))
def test_prm_scores_match_a_plain_transformers_forward(model_dirs: dict[str, Path], key: str) -> None:
    """Gather-then-head on the padded batch == the full HF forward, one sample at a time, read at each step."""
    m = load_model(_spec(model_dirs, key))
    encoded = m.encoder.encode_steps(PROBLEMS)
    for (_, steps), e in zip(PROBLEMS, encoded):
        assert len(e.positions) == len(steps)
        if m.encoder.marker_id is not None:
            assert all(e.ids[p] == m.encoder.marker_id for p in e.positions)
            assert e.ids.count(m.encoder.marker_id) == len(steps)  # text "ки"/"<extra_0>" in a step is not a marker
    batched = m.run(encoded)
    tok = m.encoder.tok
    with torch.inference_mode():
        for e, got in zip(encoded, batched):
            logits = m.model(input_ids=torch.tensor([e.ids])).logits[0, e.positions].float()
            if key == "step_tag":
                pair = logits[:, [tok.convert_tokens_to_ids("+"), tok.convert_tokens_to_ids("-")]]
                want = torch.softmax(pair, -1)[:, 0]
            else:
                want = torch.softmax(logits, -1)[:, 1]
            assert got == pytest.approx(want.tolist(), abs=1e-5)
            assert all(0.0 <= x <= 1.0 for x in got)


def test_chat_template_frames_the_prompt(model_dirs: dict[str, Path]) -> None:
    m = load_model(_spec(model_dirs, "separator_chat"))
    [e] = m.encoder.encode_steps([("What is 2+2?", ["4"])])
    text = m.encoder.tok.decode(e.ids)
    assert text.startswith("<|im_start|>system\nReason step by step.<|im_end|>\n<|im_start|>user\nWhat is 2+2?")
    assert text.endswith("<|im_start|>assistant\n4<extra_0>")


def test_orm_matches_sequence_classification_forward(model_dirs: dict[str, Path]) -> None:
    m = load_model(_spec(model_dirs, "orm"))
    items = [("What is 2+2?", "It is 4."), ("Solve 3x + 5 = 20.", "x = 5 " * 30), ("q", "a")]
    encoded = m.encoder.encode_responses(items)
    got = [r[0] for r in m.run(encoded)]
    with torch.inference_mode():
        want = [m.model(input_ids=torch.tensor([e.ids])).logits[0, 0].item() for e in encoded]
    assert got == pytest.approx(want, abs=1e-5)
    assert len(set(round(x, 6) for x in got)) == 3


def _run(coro):
    return asyncio.run(coro)


def test_batched_equals_one_at_a_time_and_concurrent_callers_share_batches(model_dirs: dict[str, Path]) -> None:
    m = load_model(_spec(model_dirs, "separator"))
    encoded = m.encoder.encode_steps(PROBLEMS * 4)
    alone = [m.run([e])[0] for e in encoded]

    async def main() -> tuple[list, Batcher]:
        b = Batcher(m.run, max_batch_tokens=100_000, max_wait_ms=50)
        results = await asyncio.gather(*(b.score([e]) for e in encoded))  # 20 separate callers
        await b.close()
        return [r[0] for r in results], b

    together, batcher = _run(main())
    for a, t in zip(alone, together):
        assert t == pytest.approx(a, abs=1e-5)
    assert batcher.stats.sequences == len(encoded)
    assert batcher.stats.batches < len(encoded) / 4  # merged, not one forward per caller


def test_token_budget_caps_padded_batch(model_dirs: dict[str, Path]) -> None:
    m = load_model(_spec(model_dirs, "step_tag"))
    encoded = m.encoder.encode_steps(PROBLEMS * 3)
    seen: list[int] = []

    def runner(batch):
        seen.append(len(batch) * max(len(e) for e in batch))
        return m.run(batch)

    async def main() -> list:
        b = Batcher(runner, max_batch_tokens=160, max_wait_ms=20)
        out = await b.score(encoded)
        await b.close()
        return out

    out = _run(main())
    assert all(not isinstance(r, BaseException) for r in out)
    assert all(s <= 160 or s == max(len(e) for e in encoded) for s in seen)
    assert len(seen) > 1


def test_out_of_memory_splits_and_retries(model_dirs: dict[str, Path]) -> None:
    m = load_model(_spec(model_dirs, "separator"))
    encoded = m.encoder.encode_steps(PROBLEMS * 2)
    calls: list[int] = []

    def flaky(batch):
        """Simulated device: anything over 2 sequences, or the one very long sequence, does not fit."""
        calls.append(len(batch))
        if len(batch) > 2 or any(len(e) > 150 for e in batch):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return m.run(batch)

    freed: list[int] = []

    async def main() -> tuple[list, Batcher]:
        b = Batcher(flaky, max_batch_tokens=100_000, max_wait_ms=10, on_oom=lambda: freed.append(1))
        out = await b.score(encoded)
        await b.close()
        return out, b

    out, b = _run(main())
    too_long = [i for i, e in enumerate(encoded) if len(e) > 150]
    assert too_long  # the fixture holds one over-long problem
    for i, (e, r) in enumerate(zip(encoded, out)):
        if i in too_long:
            assert isinstance(r, ModelOutOfMemory)
        else:
            assert r == pytest.approx(m.run([e])[0], abs=1e-5)
    assert b.stats.oom_splits >= 2 and freed
    assert max(calls) == len(encoded)


def test_hub_readiness_and_failures(model_dirs: dict[str, Path]) -> None:
    import threading

    gate = threading.Event()

    def slow_loader(spec: ModelSpec):
        gate.wait(30)
        if spec.name == "broken":
            raise OSError("no such model directory")
        return load_model(spec)

    async def main() -> None:
        hub = ModelHub([_spec(model_dirs, "separator"), ModelSpec(name="broken", path="/nonexistent")],
                       loader=slow_loader)
        hub.start()
        await asyncio.sleep(0.05)
        assert hub.ready is False
        from verifiers.types import VerifierUnavailable

        with pytest.raises(VerifierUnavailable, match="still loading"):
            await hub.score_steps("separator", [("q", ["a"])])
        gate.set()
        with pytest.raises(VerifierUnavailable, match="broken"):
            await hub.wait_ready(30)
        assert hub.ready is False  # a model that failed keeps the server not ready
        [r] = await hub.score_steps("separator", [("q", ["a", "b"])])
        assert len(r) == 2
        with pytest.raises(VerifierUnavailable, match="no such model"):
            await hub.score_steps("broken", [("q", ["a"])])
        with pytest.raises(KeyError):
            hub.spec("nope")
        await hub.close()

    _run(main())
