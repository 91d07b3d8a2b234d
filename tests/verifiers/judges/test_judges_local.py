"""The local transformers judge backend on a tiny random model built on disk here: real tokenizer (trained offline
with ``tokenizers``), chat template, save_pretrained, and the backend's own loading and batched generation."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from reward_service.resources.judges import build_judges  # noqa: E402
from reward_service.settings import Settings  # noqa: E402
from verifiers.engine import Engine  # noqa: E402
from verifiers.engine.registry import load_modules  # noqa: E402
from verifiers.kinds.judges.backends import Sampling, TransformersBackend  # noqa: E402
from verifiers.kinds.judges.prompts import reference_messages  # noqa: E402
from verifiers.kinds.judges.registry import JUDGES  # noqa: E402
from verifiers.types import Status, VerifyItem  # noqa: E402

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_judge(path: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["You are a strict grader. Reply with one JSON object: {\"verdict\": \"yes\"}",
              "The answer is 42. Response, reference, question, criteria.", "<response-abc> data </response-abc>"]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token="<|im_start|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=fast.bos_token_id)
    LlamaForCausalLM(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_judge(tmp_path_factory.mktemp("tiny-judge"))


@pytest.fixture
def backend(model_dir: Path) -> Iterator[TransformersBackend]:
    yield TransformersBackend("local", str(model_dir), device="cpu", max_batch_size=8, batch_wait_ms=300)


def _conversations() -> list[list[dict[str, str]]]:
    return [reference_messages(r, "42", q) for r, q in
            [("The answer is 42.", None), ("41", "What is 6*7?"), ("It is forty-two, i.e. 42, clearly.", "6*7?")]]


def test_loads_through_settings_and_batches_with_left_padding(model_dir: Path) -> None:
    settings = Settings(judge_local_model=str(model_dir), judge_local_device="cpu")
    greedy = Sampling(max_tokens=6)

    async def go() -> tuple[list[str], list[str], int]:
        judges = build_judges(settings)
        await judges.start()
        try:
            local = judges.get()
            assert isinstance(local, TransformersBackend) and local.name == "local"
            local.batch_wait_s = 0.3
            batched = await asyncio.gather(*(local.complete(c, greedy) for c in _conversations()))
            batches = local.batches_run
            alone = [local.generate([c], greedy)[0] for c in _conversations()]
            return list(batched), alone, batches
        finally:
            await judges.aclose()

    batched, alone, batches = asyncio.run(go())
    assert batches == 1  # three concurrent calls, one generate()
    assert batched == alone  # left padding: each row continues its own prompt as if it ran alone
    assert all(isinstance(t, str) for t in batched)


def test_random_model_output_is_an_error_verdict_not_zero(backend: TransformersBackend) -> None:
    from verifiers.kinds.judges.registry import JudgeRegistry

    async def go() -> list:
        judges = JudgeRegistry({"local": backend})
        await judges.start()
        engine = Engine(load_modules(["verifiers.kinds.basic", "verifiers.kinds.judges"]), resources={JUDGES: judges},
                        default_timeout_s=120)
        try:
            return await engine.verify_many([
                VerifyItem("judge_reference", "The answer is 42.", "42", {"max_tokens": 8}),
                VerifyItem("judge_reference", "Solution", "42", {"max_tokens": 8}),
            ])
        finally:
            await judges.aclose()

    judged, guarded = asyncio.run(go())
    assert judged.status == Status.ERROR and judged.score is None, judged
    assert guarded.status == Status.REJECTED and backend.batches_run == 1


def test_sampled_generation_is_reproducible_with_a_seed(backend: TransformersBackend) -> None:
    async def go() -> tuple[str, str]:
        await backend.start()
        try:
            s = Sampling(temperature=1.0, max_tokens=8, seed=3)
            return await backend.complete(_conversations()[0], s), await backend.complete(_conversations()[0], s)
        finally:
            await backend.aclose()

    first, second = asyncio.run(go())
    assert first == second


def test_missing_model_is_unavailable(tmp_path: Path) -> None:
    broken = TransformersBackend("local", str(tmp_path / "nowhere"), device="cpu")

    async def go() -> None:
        await broken.start()
        try:
            await broken.complete(_conversations()[0], Sampling())
        finally:
            await broken.aclose()

    from verifiers.types import VerifierUnavailable

    with pytest.raises(VerifierUnavailable, match="could not load"):
        asyncio.run(go())
    assert broken.ready is True and broken.failure
