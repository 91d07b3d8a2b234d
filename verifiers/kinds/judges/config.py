"""How a judge backend is described in settings. Backends are named by the operator, never by a request, so no
caller can point the server at an arbitrary URL."""
from __future__ import annotations

import os
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class _BackendConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_concurrency: int | None = Field(
        None, ge=1, description="Calls in flight at once (default: judge_max_concurrency).")


class OpenAIBackendConfig(_BackendConfig):
    """An OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp server, hosted APIs)."""

    kind: Literal["openai"] = "openai"
    base_url: str = Field(..., description="Up to and including the version prefix, e.g. http://host:8000/v1.")
    model: str
    api_key: SecretStr | None = None
    api_key_env: str | None = Field(None, description="Name of an environment variable holding the API key.")
    timeout_s: float | None = Field(None, gt=0, description="Per-call timeout (default: judge_timeout_s).")
    max_retries: int | None = Field(None, ge=0)
    json_mode: bool = Field(False, description="Send response_format={'type': 'json_object'} (if the server has it).")
    requests_per_minute: int | None = Field(
        None, ge=1, description="Most calls sent in any 60 s (retries count); unset: no limit.")
    tokens_per_minute: int | None = Field(
        None, ge=1, description="Most tokens (prompt + completion) charged in any 60 s: estimated before a call "
        "(prompt length, max_tokens), corrected from the usage the server returns; unset: no limit.")
    burst: int | None = Field(
        None, ge=1, description="Calls sent back to back before pacing to one per 60/requests_per_minute s "
        "(default 1: calls evenly spaced).")

    def resolved_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return os.environ.get(self.api_key_env)
        return None


class TransformersBackendConfig(_BackendConfig):
    """A local causal LM loaded with transformers (for teams without an inference server)."""

    kind: Literal["transformers"] = "transformers"
    model_path: str = Field(..., description="A local directory written by save_pretrained.")
    device: str = Field("auto", description="'auto' (cuda when present, else cpu), 'cpu', 'cuda', 'cuda:1'...")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    max_batch_size: int = Field(8, ge=1, description="Prompts generated together in one left-padded batch.")
    batch_wait_ms: float = Field(5.0, ge=0, description="How long a batch waits for company before it runs.")


BackendConfig = Annotated[OpenAIBackendConfig | TransformersBackendConfig, Field(discriminator="kind")]
