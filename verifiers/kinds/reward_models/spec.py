"""What a configured reward model is: where it lives, how its inputs are laid out and how it is served."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verifiers.kinds.reward_models.steps import SplitRule

Format = Literal["separator", "step_tag", "token_classification", "sequence_classification"]
Backend = Literal["local", "vllm", "sglang"]


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
    # --- a model served elsewhere: ``path`` then only names the tokenizer, the weights live on the server ---------
    backend: Backend = Field(
        "local", description="local: load the weights here; vllm: a vLLM server (/pooling for PRMs, /classify for "
        "ORMs); sglang: an SGLang server (native /classify, ORMs only).")
    url: str | None = Field(None, description="Base URL of the vLLM/SGLang server, e.g. http://rm-host:8000.")
    remote_model: str | None = Field(None, description="The model name the server knows (default: path).")
    api_key_env: str | None = Field(None, description="Environment variable holding the server's bearer key.")
    timeout_s: float = Field(60.0, gt=0, le=3600, description="Per HTTP request to the server.")
    max_retries: int = Field(3, ge=0, le=20, description="Retries on connection errors, timeouts, 429 and 5xx.")
    retry_backoff_s: float = Field(0.5, ge=0, le=60, description="First retry delay; doubles each time (jittered).")
    max_concurrency: int = Field(8, ge=1, le=1024, description="HTTP requests in flight to the server.")
    max_items_per_request: int = Field(64, ge=1, le=4096, description="Sequences sent in one HTTP request.")
    max_reply_mb: float = Field(64.0, gt=0, le=4096, description="Largest reply read from the server (MiB).")
    pooling_task: str | None = Field(
        "token_classify", description="vLLM /pooling 'task' for PRMs (token_classify since vLLM 0.11; null to omit, "
        "for older servers).")

    @property
    def remote(self) -> bool:
        return self.backend != "local"

    @property
    def kind(self) -> Literal["prm", "orm"]:
        return "orm" if self.format == "sequence_classification" else "prm"

    @model_validator(mode="after")
    def _defaults(self) -> ModelSpec:
        if self.format == "separator" and self.separator is None:
            self.separator = "<extra_0>"
        if self.remote and not self.url:
            raise ValueError(f"reward model {self.name!r}: backend {self.backend!r} needs 'url'")
        if self.remote and self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"reward model {self.name!r}: url must start with http:// or https://")
        if self.backend == "sglang" and self.kind == "prm":
            raise ValueError(
                f"reward model {self.name!r}: SGLang serves reward models with last-token pooling only (no step "
                "pooling), so a PRM needs backend 'vllm' (or 'local')")
        return self
