"""Service settings: embedded defaults, then an optional YAML/TOML file, then ``REWARD_SERVICE_*`` environment
variables (environment wins). Each capability keeps its settings in its own block below."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from reward_service.sandbox_models import SandboxLimits, default_caps
from verifiers.judges.config import BackendConfig as JudgeBackendConfig
from verifiers.reward_models.spec import ModelSpec

ENV_PREFIX = "REWARD_SERVICE_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", env_nested_delimiter="__")

    # --- server ---
    host: str = Field("127.0.0.1", description="Bind address; loopback by default.")
    port: int = Field(8000, ge=0, le=65535)
    auth_token: SecretStr | None = Field(None, description="When set, every /v1 call needs 'Authorization: Bearer <token>'.")
    log_level: str = "INFO"
    log_json: bool = Field(True, description="One JSON object per log line.")

    # --- execution ---
    workers: int = Field(0, ge=0, description="Verifier worker processes; 0 means one per CPU core.")
    worker_memory_mb: int = Field(4096, ge=0, description="Address-space cap per verifier worker (0: none).")
    item_timeout_s: float = Field(10.0, gt=0, description="Default per-item deadline.")
    worker_slow_after_s: float = Field(
        2.0, ge=0, description="A check running longer is set aside: its worker drops to a low CPU priority "
        "(nice 10) and a fresh one takes its place (0: never).")
    max_item_timeout_s: float = Field(300.0, gt=0, description="Largest deadline a request may ask for.")
    extra_verifier_modules: list[str] = Field(
        default_factory=list, description="Python modules exposing VERIFIERS, loaded beside the built-in ones."
    )

    # --- admission control and input limits ---
    max_pending_items: int = Field(8192, ge=1, description="Items admitted but not finished; beyond it: 429.")
    max_batch_items: int = Field(4096, ge=1, description="Items in one request.")
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Request body size; beyond it: 413.")
    max_response_chars: int = Field(1_000_000, ge=1, description="Characters in one item's response.")
    max_reference_chars: int = Field(1_000_000, ge=1, description="Characters in one item's reference (as JSON).")
    max_options_chars: int = Field(100_000, ge=1, description="Characters in one item's options (as JSON); beyond: 413.")
    max_id_chars: int = Field(1024, ge=1, description="Characters in an item's id or group; beyond: 422.")
    max_number_digits: int = Field(
        1000, ge=1, description="Digits of an integer in a reference or options; beyond, or not finite: 422.")
    retry_after_s: int = Field(1, ge=1, description="Retry-After sent with 429/503.")
    shutdown_grace_s: float = Field(30.0, ge=0, description="How long shutdown waits for in-flight work.")

    # --- sandbox (issue 4) ---
    sandbox_backend: str = Field("bwrap", description="bwrap (default), docker, or none (every run: sandbox_error).")
    sandbox_warm_pool: int = Field(4, ge=0, description="Pre-started sandboxes waiting for a program (0: cold starts).")
    sandbox_max_concurrent: int = Field(0, ge=0, description="Programs running at once; 0 means 2 x CPU cores.")
    sandbox_caps: SandboxLimits = Field(default_factory=default_caps, description="Most a request may ask for.")
    sandbox_defaults: SandboxLimits = Field(default_factory=SandboxLimits, description="Limits of a request naming none.")
    sandbox_languages: list[str] | None = Field(None, description="Languages offered; None: all with a toolchain.")
    sandbox_uid_base: int = Field(200_000, ge=1000, description="When run as root: first of the per-sandbox uids.")
    sandbox_compile_wall_s: float = Field(60.0, gt=0, description="Wall-clock budget of a compile step.")
    sandbox_max_input_chars: int = Field(4_000_000, ge=1, description="code + stdin + files of one run.")
    sandbox_memory_cgroup: str = Field("auto", description="auto: a memory cgroup per sandbox where the host allows "
                                       "(v1 memory controller or delegated v2); off; or the path of a delegated cgroup.")
    # --- judges (issue 7) ---
    judge_base_url: str | None = Field(
        None, description="Default judge backend ('default'): an OpenAI-compatible base URL ending in /v1.")
    judge_model: str | None = Field(None, description="Model name sent to the default judge backend.")
    judge_api_key: SecretStr | None = Field(None, description="API key of the default judge backend (never logged).")
    judge_backends: dict[str, JudgeBackendConfig] = Field(
        default_factory=dict, description="More named judge backends ('openai' or 'transformers'), see docs/judges.md.")
    judge_local_model: str | None = Field(None, description="A local transformers judge directory (backend 'local').")
    judge_local_device: str = Field("auto", description="Device of the local judge: auto, cpu, cuda, cuda:N.")
    judge_default_backend: str | None = Field(None, description="Backend used when a request names none.")
    judge_max_concurrency: int = Field(16, ge=1, description="Judge calls in flight per backend.")
    judge_timeout_s: float = Field(60.0, gt=0, description="Per-call timeout of a judge HTTP call.")
    judge_max_retries: int = Field(3, ge=0, description="Retries on 429/5xx/connection errors (jittered backoff).")
    judge_backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles per retry.")
    judge_backoff_max_s: float = Field(20.0, ge=0, description="Longest retry delay (also caps Retry-After).")
    judge_cache_size: int = Field(10_000, ge=0, description="Cached judge completions (0: no cache, no de-dup).")
    # --- reward models (issue 8) ---
    reward_models: list[ModelSpec] = Field(
        default_factory=list, description="Process/outcome reward models loaded at start-up (docs/reward-models.md)."
    )
    # --- calibration and audits (issue 9) ---
    calibration_db: str = Field(
        "~/.local/state/reward-service/calibration.sqlite3",
        description="SQLite file of the calibration store (FP/FN counts per verifier configuration, appeal counters).",
    )
    appeal_judge: str | None = Field(None, description="Default judge verifier for options.appeal.")
    calibration_min_appeals: int = Field(30, ge=1, description="Appeals needed before the online FN rate is used.")
    calibration_wide_interval: float = Field(
        0.2, gt=0, le=1, description="A noise rate whose 95% interval is wider than this gets a warning in the verdict."
    )
    # --- trainer adapters (issue 10) ---
    openrlhf_verifier: str = Field("math", description="Verifier that scores /openrlhf/reward requests.")
    openrlhf_options: dict[str, Any] = Field(default_factory=dict, description="Options for that verifier.")
    openrlhf_null_reward: float = Field(
        0.0, description="Reward sent to OpenRLHF (which only takes floats) for a verdict with a null score."
    )
    openrlhf_strip_suffixes: list[str] = Field(
        default_factory=lambda: ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>",
                                 "<｜end▁of▁sentence｜>", "<|end|>"],
        description="End-of-turn tokens removed from the end of a decoded OpenRLHF query before scoring.",
    )
    # --- reward specs (issue 12) ---
    reward_specs: dict[str, Any] = Field(
        default_factory=dict,
        description="Named reward specs: name -> {components: [...], normalize: bool}; used as verifier 'spec:NAME'.",
    )
    length_tokenizers: dict[str, str] = Field(
        default_factory=dict, description="Tokenizer name -> local directory, for the length verifier's unit=tokens."
    )

    @model_validator(mode="after")
    def _batch_fits_the_queue(self) -> Settings:
        # A batch larger than the admission queue could never be admitted: every retry would get 429 forever.
        if self.max_batch_items > self.max_pending_items:
            raise ValueError(
                f"max_batch_items ({self.max_batch_items}) must not exceed max_pending_items "
                f"({self.max_pending_items}): a batch that large could never be admitted"
            )
        return self

    def effective_workers(self) -> int:
        return self.workers or os.cpu_count() or 1


def _read_file(path: Path) -> dict[str, Any]:
    text = path.read_text()
    if path.suffix == ".toml":
        data = tomllib.loads(text)
    else:
        data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a mapping")
    return data


def load_settings(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Defaults < config file < environment < explicit overrides (CLI flags)."""
    path = config_file or os.environ.get(f"{ENV_PREFIX}CONFIG")
    file_values = _read_file(Path(path)) if path else {}
    env_values = Settings().model_dump(exclude_unset=True)  # only what the environment set
    merged = {**file_values, **env_values, **{k: v for k, v in overrides.items() if v is not None}}
    return Settings.model_validate(merged) if merged else Settings()
