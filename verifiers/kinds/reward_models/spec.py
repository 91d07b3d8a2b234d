"""What a configured reward model is: where it lives, how its inputs are laid out and how it is served."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verifiers.kinds.reward_models.steps import SplitRule

Format = Literal["separator", "step_tag", "token_classification", "sequence_classification"]


class ModelSpec(BaseModel):
    """One reward model in the settings' ``reward_models`` list."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, description="Name used in requests.")
    path: str = Field(..., min_length=1, description="Local directory, or a hub name when the host has network.")
    format: Format = Field(
        "separator",
        description="separator: Qwen2.5-Math-PRM style (2-class head read at a separator token after each step); "
        "step_tag: Math-Shepherd style (causal LM, P(good)/(P(good)+P(bad)) at a tag after each step); "
        "token_classification: a token-classification head read at the last token of each step (or at the "
        "separator when one is set); sequence_classification: an ORM giving one scalar per response.",
    )
    separator: str | None = Field(None, description="Separator token (default '<extra_0>' for format separator).")
    step_tag: str = Field("ки", description="Step tag token for format step_tag.")
    good_token: str = Field("+", description="Label token meaning 'step is correct' (step_tag).")
    bad_token: str = Field("-", description="Label token meaning 'step is wrong' (step_tag).")
    positive_label: int = Field(1, ge=0, description="Class index meaning 'correct' in classification heads.")
    orm_activation: Literal["none", "sigmoid"] = Field(
        "none", description="For a one-logit ORM: return the raw scalar or its sigmoid."
    )
    split: SplitRule = Field("blank_lines", description="How a response given as text is cut into steps.")
    template: Literal["auto", "chat", "plain"] = Field(
        "auto", description="chat: the tokenizer's chat template; plain: prompt, newline, steps; auto: chat if any."
    )
    system_prompt: str | None = Field(None, description="System message for the chat template (Qwen PRMs use one).")
    device: str = Field("auto", description="auto (cuda when available, else cpu), cpu, cuda, cuda:1 ...")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto", description="auto: bf16 on GPU, fp32 on CPU.")
    attn_implementation: str = Field("auto", description="auto: flash_attention_2 when installed on GPU, else sdpa.")
    max_batch_tokens: int = Field(16384, ge=16, description="Padded tokens per forward pass.")
    max_batch_size: int = Field(256, ge=1, description="Sequences per forward pass.")
    max_wait_ms: float = Field(5.0, ge=0, le=1000, description="How long an idle model waits to fill a batch.")
    max_length: int | None = Field(None, ge=8, description="Longest input in tokens (default: the model's limit).")
    trust_remote_code: bool = Field(False, description="Allow the checkpoint's own modelling code (Qwen PRMs).")
    warmup: bool = Field(True, description="Run one batch at start-up so the first request pays no compile cost.")

    @property
    def kind(self) -> Literal["prm", "orm"]:
        return "orm" if self.format == "sequence_classification" else "prm"

    @model_validator(mode="after")
    def _defaults(self) -> ModelSpec:
        if self.format == "separator" and self.separator is None:
            self.separator = "<extra_0>"
        return self
