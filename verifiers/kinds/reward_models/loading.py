"""Loading a reward model with transformers and running one padded batch through it.

torch and transformers are imported here only, so the rest of the service starts without them. A forward pass
runs the base model, gathers the hidden states at the score positions (one index op, no Python loop over tokens)
and applies the head to those rows only: a causal-LM PRM never materialises vocabulary-sized logits for every
token, only the two label-token rows of the output embedding at each step tag.
"""
from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from verifiers.kinds.reward_models.formats import Encoded, Encoder, resolve_token_id
from verifiers.kinds.reward_models.spec import ModelSpec

log = logging.getLogger(__name__)


def pick_device(wanted: str) -> str:
    import torch

    if wanted == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return wanted


def pick_dtype(wanted: str, device: str) -> Any:
    import torch

    if wanted == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, wanted)


def pick_attention(wanted: str, device: str) -> str:
    if wanted != "auto":
        return wanted
    if device.startswith("cuda") and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


def _auto_class(spec: ModelSpec, config: Any) -> Any:
    import transformers

    auto_map = getattr(config, "auto_map", None) or {}
    if spec.format == "step_tag":
        return transformers.AutoModelForCausalLM
    if spec.format == "sequence_classification":
        return transformers.AutoModelForSequenceClassification
    if spec.trust_remote_code and "AutoModel" in auto_map and "AutoModelForTokenClassification" not in auto_map:
        return transformers.AutoModel  # Qwen2ForProcessRewardModel ships its own class behind AutoModel
    return transformers.AutoModelForTokenClassification


def _split_head(model: Any) -> tuple[Any, Any] | None:
    """(base model, head module) when the model is a base plus a head, which lets us gather before the head."""
    base = getattr(model, getattr(model, "base_model_prefix", ""), None)
    for attr in ("score", "classifier"):
        head = getattr(model, attr, None)
        if base is not None and head is not None and callable(head):
            return base, head
    return None


@dataclass
class LoadedModel:
    """A model ready to score: tokenizer-side encoder, device-side module and the head read-out."""

    spec: ModelSpec
    encoder: Encoder
    model: Any
    device: str
    dtype: Any
    pad_id: int
    max_length: int
    n_params: int
    attn_implementation: str
    # Set right after construction by load_model (it needs the built model); never None once a caller sees it.
    _forward: Callable[[Any, Any, Any], Any] = None  # type: ignore[assignment]  # filled in after __init__

    def run(self, batch: Sequence[Encoded]) -> list[list[float]]:
        """Scores at every score position of every sequence in ``batch`` (one padded forward pass)."""
        import torch

        lengths = [len(e) for e in batch]
        width = max(lengths)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, e in enumerate(batch):  # a loop over sequences; the copy itself is one C call
            ids[row, : len(e)] = torch.as_tensor(e.ids, dtype=torch.long)
            mask[row, : len(e)] = 1
        counts = [len(e.positions) for e in batch]
        flat = torch.as_tensor(
            [row * width + p for row, e in enumerate(batch) for p in e.positions], dtype=torch.long
        )
        with torch.inference_mode():
            ids = ids.to(self.device, non_blocking=True)
            mask = mask.to(self.device, non_blocking=True)
            scores = self._forward(ids, mask, flat.to(self.device, non_blocking=True)).float().cpu()
        return [chunk.tolist() for chunk in torch.split(scores, counts)]


def _make_forward(spec: ModelSpec, model: Any, encoder: Encoder) -> Callable[[Any, Any, Any], Any]:
    import torch

    def to_scores(logits: Any) -> Any:
        if spec.format == "step_tag":
            return torch.softmax(logits.float(), dim=-1)[:, 0]
        if logits.shape[-1] == 1:
            out = logits[:, 0].float()
            return torch.sigmoid(out) if (spec.kind == "prm" or spec.orm_activation == "sigmoid") else out
        return torch.softmax(logits.float(), dim=-1)[:, spec.positive_label]

    if spec.format == "step_tag":
        base = model.get_decoder() if hasattr(model, "get_decoder") else None
        out_emb = model.get_output_embeddings()
        tok = encoder.tok
        label_ids = torch.as_tensor(
            [resolve_token_id(tok, spec.good_token), resolve_token_id(tok, spec.bad_token)],
            device=out_emb.weight.device,
        )
        weight = out_emb.weight.index_select(0, label_ids).detach()
        bias = out_emb.bias.index_select(0, label_ids).detach() if getattr(out_emb, "bias", None) is not None else None

        def forward_lm(ids: Any, mask: Any, flat: Any) -> Any:
            if base is None:
                logits = model(input_ids=ids, attention_mask=mask).logits
                rows = logits.reshape(-1, logits.shape[-1]).index_select(0, flat)
                return to_scores(rows.index_select(1, label_ids))
            hidden = base(input_ids=ids, attention_mask=mask).last_hidden_state
            rows = hidden.reshape(-1, hidden.shape[-1]).index_select(0, flat)
            return to_scores(torch.nn.functional.linear(rows, weight, bias))

        return forward_lm

    split = _split_head(model)

    def forward_head(ids: Any, mask: Any, flat: Any) -> Any:
        if split is None:
            out = model(input_ids=ids, attention_mask=mask)
            logits = out.logits if hasattr(out, "logits") else out[0]
            if logits.dim() == 2:  # a pooled sequence head: one row per sequence already
                return to_scores(logits)
            return to_scores(logits.reshape(-1, logits.shape[-1]).index_select(0, flat))
        base, head = split
        hidden = base(input_ids=ids, attention_mask=mask).last_hidden_state
        rows = hidden.reshape(-1, hidden.shape[-1]).index_select(0, flat)
        return to_scores(head(rows))

    return forward_head


def load_model(spec: ModelSpec) -> LoadedModel:
    """Load tokenizer and weights (local directory or hub name), put them on the device, warm up."""
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it untyped
    started = time.perf_counter()
    device = pick_device(spec.device)
    dtype = pick_dtype(spec.dtype, device)
    attn = pick_attention(spec.attn_implementation, device)
    tokenizer = transformers.AutoTokenizer.from_pretrained(spec.path, trust_remote_code=spec.trust_remote_code)
    config = transformers.AutoConfig.from_pretrained(spec.path, trust_remote_code=spec.trust_remote_code)
    cls = _auto_class(spec, config)
    model = cls.from_pretrained(
        spec.path, dtype=dtype, attn_implementation=attn, trust_remote_code=spec.trust_remote_code
    )
    model.to(device).eval()
    encoder = Encoder(spec, tokenizer)
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    limit = spec.max_length or int(getattr(model.config, "max_position_embeddings", 0) or 32768)
    loaded = LoadedModel(
        spec, encoder, model, device, dtype, int(pad_id), limit,
        sum(p.numel() for p in model.parameters()), attn,
    )
    loaded._forward = _make_forward(spec, model, encoder)
    if spec.warmup:
        if spec.kind == "orm":
            sample = encoder.encode_responses([("1+1?", "2")])
        else:
            sample = encoder.encode_steps([("1+1?", ["1+1=2.", "The answer is 2."])])
        loaded.run(sample)
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
    log.info(
        "loaded reward model %s (%s, %.1fM params) on %s in %.1fs",
        spec.name, spec.format, loaded.n_params / 1e6, device, time.perf_counter() - started,
        extra={"model": spec.name, "device": device, "dtype": str(dtype), "attn": attn},
    )
    return loaded
