"""A tiny real causal LM (Qwen2, on disk) that writes a fixed assistant message, so a trainer's own generation and
tool-calling loop can be driven end to end on CPU: a random tiny model never writes a well-formed tool call.

The model is a bigram table built into ordinary weights: its attention and MLP outputs are zeroed, so the last
hidden state is the current token's embedding, and ``lm_head`` maps each script token's (orthonormal) embedding to
the next script token, and every other token's (shared) embedding to the script's first token. Each script piece is
one added token, so the text decodes exactly. The tokenizer carries Qwen3's chat template (from TRL's own copy), which
TRL recognizes for tool-call parsing.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.reward_models import build_tokenizer

SCALE = 6.0


def build_scripted_policy(path: Path, pieces: list[str], *, seed: int = 0) -> Path:
    """``pieces``: the assistant message, cut into tokens; it ends at ``<|im_end|>`` (appended), the EOS."""
    import torch
    import trl
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(path)
    tokenizer.add_tokens(pieces)
    template = Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja"
    tokenizer.chat_template = template.read_text()
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.save_pretrained(path)
    script = [tokenizer.convert_tokens_to_ids(p) for p in pieces] + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    assert len(set(script)) == len(script), "every piece must be a distinct token"

    hidden = 64
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=script[-1], tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    basis, _ = torch.linalg.qr(torch.randn(hidden, hidden))
    common, own = basis[:, 0], basis[:, 1:1 + len(script)].T
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed = model.model.embed_tokens.weight
        embed.copy_(common.expand_as(embed) + 0.05 * torch.randn_like(embed))
        for k, token in enumerate(script):
            embed[token] = own[k]
        head = model.lm_head.weight
        head.zero_()
        head[script[0]] += SCALE * common
        for k in range(len(script) - 1):
            head[script[k + 1]] += SCALE * own[k]
    model.generation_config = GenerationConfig(eos_token_id=script[-1], pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(path)
    return path
