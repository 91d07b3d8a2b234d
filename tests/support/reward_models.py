"""Tiny random reward models written to disk, loaded back through the service's real loading code.

The tokenizer is trained offline with the ``tokenizers`` library (byte-level BPE) and carries the special tokens
the PRM formats need; the models are Qwen2 architectures with random weights, saved with ``save_pretrained``.
"""
from __future__ import annotations

import json
from pathlib import Path

CORPUS = [
    "Step 1: Natalia sold 48 clips in April and half as many in May, so 48 / 2 = 24 clips.",
    "Step 2: In total she sold 48 + 24 = 72 clips. The answer is \\boxed{72}.",
    "Let x be the number of apples. Then 3x + 5 = 20, so x = 5.",
    "Thus the area is \\frac{1}{2} \\cdot 6 \\cdot 8 = 24 square units.",
    "Шаг ки правильный или неправильный + -",
]
# Problems with their solution steps, which the tiny tokenizer's corpus covers; tests add their own edge cases.
STEPWISE = [
    ("What is 2+2?", ["2+2 = 4.", "The answer is \\boxed{4}."]),
    ("Natalia sold 48 clips in April and half as many in May. How many in total?",
     ["In May she sold 48 / 2 = 24 clips.", "In total 48 + 24 = 72.", "Wait, check: 72.", "\\boxed{72}"]),
    ("Solve 3x + 5 = 20.", ["3x = 15", "x = 5"]),
]
SPECIALS = ["<pad>", "<|endoftext|>", "<extra_0>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
)


def build_tokenizer(path: Path, *, chat: bool = False):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=384, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<|endoftext|>",
        additional_special_tokens=["<extra_0>", "<|im_start|>", "<|im_end|>"],
    )
    fast.add_tokens(["ки"])  # Math-Shepherd's step tag, an ordinary token
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    return fast


def _config(tokenizer, **extra):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False, **extra,
    )


def build_model(path: Path, kind: str, *, seed: int = 0, chat: bool = False, num_labels: int = 2) -> Path:
    """kind: token_classification (PRM heads), causal_lm (Math-Shepherd) or sequence_classification (ORM)."""
    import torch
    from transformers import Qwen2ForCausalLM, Qwen2ForSequenceClassification, Qwen2ForTokenClassification

    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(path, chat=chat)
    torch.manual_seed(seed)
    cls = {
        "token_classification": Qwen2ForTokenClassification,
        "causal_lm": Qwen2ForCausalLM,
        "sequence_classification": Qwen2ForSequenceClassification,
    }[kind]
    model = cls(_config(tokenizer, num_labels=num_labels)).eval()
    with torch.no_grad():  # random heads of std 0.02 give scores near 0.5; widen them so tests see contrast
        for p in model.parameters():
            p.mul_(8.0) if p.dim() == 2 and p.shape[0] <= 2 else None
    model.save_pretrained(path)
    return path


def model_env(specs: list[dict]) -> dict[str, str]:
    return {"REWARD_SERVICE_REWARD_MODELS": json.dumps(specs)}


def _tiny_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate("the answer is four and so on".split())}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(path)


def build_embedding_model(path: Path, *, seed: int = 0) -> Path:
    """A tiny base model (no head) for mean-pooled sentence embeddings."""
    import torch
    from transformers import Qwen2Model

    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(path)
    torch.manual_seed(seed)
    Qwen2Model(_config(tokenizer)).eval().save_pretrained(path)
    return path
