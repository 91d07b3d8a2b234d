"""Service settings: one typed block per capability (``settings.limits.max_batch_items``,
``settings.sandbox.backend``, ``settings.judges.model``...).

Every source speaks the flat names that predate the blocks, so no deployment changes: embedded defaults, then an
optional YAML/TOML file (``max_batch_items: 7``), then ``REWARD_SERVICE_*`` environment variables
(``REWARD_SERVICE_MAX_BATCH_ITEMS``, ``REWARD_SERVICE_SANDBOX_CAPS__WALL_S``), then explicit overrides (CLI flags,
``Settings(workers=1)``). A flat name is its block's ``prefix`` + the field name, or the field's alias; ``FLAT_NAMES``
holds the map and ``regroup`` applies it. A file may also give a block as a mapping (``limits: {max_batch_items: 7}``);
a flat name wins over the same field inside its block. Code reads a setting through its typed block
(``settings.limits.max_batch_items``), never by flat name.
"""
from __future__ import annotations

import os
import tomllib
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, create_model, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from reward_service.schemas.sandbox import SandboxLimits, default_caps
from verifiers.kinds.judges.config import BackendConfig as JudgeBackendConfig
from verifiers.kinds.reward_models.spec import ModelSpec

ENV_PREFIX = "REWARD_SERVICE_"
CONFIG_ENV = "REWARD_SERVICE_CONFIG"  # the settings file, where no --config names one


class Block(BaseModel):
    """One capability's settings; ``prefix`` + field name (or the field's alias) is the flat name of each field."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    prefix: ClassVar[str] = ""

    @classmethod
    def flat_names(cls) -> dict[str, str]:
        """Flat name -> field name."""
        return {(info.alias or cls.prefix + name): name for name, info in cls.model_fields.items()}


class ServerSettings(Block):
    host: str = Field("127.0.0.1", description="Bind address; loopback by default.")
    port: int = Field(8000, ge=0, le=65535)
    log_level: str = "INFO"
    log_json: bool = Field(True, description="One JSON object per log line.")
    shutdown_grace_s: float = Field(
        30.0, ge=0, description="How long SIGTERM lets in-flight work finish before the rest is cancelled (its "
        "items answered 'cancelled', its programs killed).")


class AuthSettings(Block):
    prefix = "auth_"
    token: SecretStr | None = Field(
        None, description="When set, every /v1 call needs 'Authorization: Bearer <token>'.")


class ExecutionSettings(Block):
    workers: int = Field(0, ge=0, description="Verifier worker processes; 0 means one per CPU core.")
    worker_memory_mb: int = Field(4096, ge=0, description="Address-space cap per verifier worker (0: none).")
    item_timeout_s: float = Field(10.0, gt=0, description="Default per-item deadline.")
    worker_slow_after_s: float = Field(
        2.0, ge=0, description="A check running longer is set aside: its worker drops to a low CPU priority "
        "(nice 19) and a fresh one takes its place (0: never).")
    max_item_timeout_s: float = Field(300.0, gt=0, description="Largest deadline a request may ask for.")
    extra_verifier_modules: list[str] = Field(
        default_factory=list, description="Python modules exposing VERIFIERS, loaded beside the built-in ones.")


class LimitsSettings(Block):
    """Admission control and input limits."""

    max_pending_items: int = Field(8192, ge=1, description="Items admitted but not finished; beyond it: 429.")
    max_batch_items: int = Field(4096, ge=1, description="Items in one request.")
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Request body size; beyond it: 413.")
    max_response_chars: int = Field(1_000_000, ge=1, description="Characters in one item's response.")
    max_reference_chars: int = Field(1_000_000, ge=1, description="Characters in one item's reference (as JSON).")
    max_options_chars: int = Field(
        100_000, ge=1, description="Characters in one item's options (as JSON); beyond: 413.")
    max_id_chars: int = Field(1024, ge=1, description="Characters in an item's id or group; beyond: 422.")
    max_messages: int = Field(512, ge=1, description="Messages in one item's conversation; beyond: 422.")
    max_messages_chars: int = Field(
        1_000_000, ge=1, description="Characters in one item's messages (as JSON); beyond: 422.")
    max_tools_chars: int = Field(
        200_000, ge=1, description="Characters in one item's tool specs (as JSON); beyond: 422.")
    max_number_digits: int = Field(
        1000, ge=1, description="Digits of an integer in a reference or options; beyond, or not finite: 422.")
    retry_after_s: int = Field(1, ge=1, description="Retry-After sent with 429/503.")

    @model_validator(mode="after")
    def _batch_fits_the_queue(self) -> LimitsSettings:
        # A batch larger than the admission queue could never be admitted: every retry would get 429 forever.
        if self.max_batch_items > self.max_pending_items:
            raise ValueError(
                f"max_batch_items ({self.max_batch_items}) must not exceed max_pending_items "
                f"({self.max_pending_items}): a batch that large could never be admitted"
            )
        return self


class SandboxSettings(Block):
    prefix = "sandbox_"
    backend: str = Field("bwrap", description="bwrap (default), docker, or none (every run: sandbox_error).")
    warm_pool: int = Field(4, ge=0, description="Pre-started sandboxes waiting for a program (0: cold starts).")
    max_concurrent: int = Field(0, ge=0, description="Programs running at once; 0 means 2 x CPU cores.")
    reuse_runs: int = Field(256, ge=1, description="Runs one bwrap sandbox serves, each in fresh mount and IPC "
                            "namespaces with nothing of the previous run alive, before it is replaced (1: a fresh "
                            "sandbox per run).")
    caps: SandboxLimits = Field(default_factory=default_caps, description="Most a request may ask for.")
    defaults: SandboxLimits = Field(default_factory=SandboxLimits, description="Limits of a request naming none.")
    languages: list[str] | None = Field(None, description="Languages offered; None: all with a toolchain.")
    uid_base: int = Field(200_000, ge=1000, description="When run as root: first of the per-sandbox uids.")
    compile_wall_s: float = Field(60.0, gt=0, description="Wall-clock budget of a compile step.")
    max_input_chars: int = Field(4_000_000, ge=1, description="code + stdin + files + args of one run.")
    max_request_output_bytes: int = Field(
        256 << 20, ge=1, description="Output (stdout, stderr, compiler output, collected files, as JSON text) one "
        "/v1/sandbox/run_batch request brings back in total; the items that finish past it keep their outcome "
        "but not their output (output_exceeded).")
    memory_cgroup: str = Field("auto", description="auto: a memory cgroup per sandbox where the host allows "
                               "(v1 memory controller or delegated v2); off; or the path of a delegated cgroup.")


class JudgeSettings(Block):
    prefix = "judge_"
    base_url: str | None = Field(
        None, description="Default judge backend ('default'): an OpenAI-compatible base URL ending in /v1.")
    model: str | None = Field(None, description="Model name sent to the default judge backend.")
    api_key: SecretStr | None = Field(None, description="API key of the default judge backend (never logged).")
    backends: dict[str, JudgeBackendConfig] = Field(
        default_factory=dict, description="More named judge backends ('openai' or 'transformers'), see docs/judges.md.")
    local_model: str | None = Field(None, description="A local transformers judge directory (backend 'local').")
    local_device: str = Field("auto", description="Device of the local judge: auto, cpu, cuda, cuda:N.")
    default_backend: str | None = Field(None, description="Backend used when a request names none.")
    requests_per_minute: int | None = Field(
        None, ge=1, description="RPM limit of backend 'default' (named backends set their own).")
    tokens_per_minute: int | None = Field(
        None, ge=1, description="TPM limit of backend 'default' (named backends set their own).")
    max_concurrency: int = Field(16, ge=1, description="Judge calls in flight per backend.")
    timeout_s: float = Field(60.0, gt=0, description="Per-call timeout of a judge HTTP call.")
    max_retries: int = Field(3, ge=0, description="Retries on 429/5xx/connection errors (jittered backoff).")
    backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles per retry.")
    backoff_max_s: float = Field(20.0, ge=0, description="Longest retry delay (also caps Retry-After).")
    cache_size: int = Field(10_000, ge=0, description="Cached judge completions (0: no cache, no de-dup).")


class LeanSettings(Block):
    """The Kimina Lean server the ``lean`` verifier checks proofs with (docs/lean.md)."""

    prefix = "lean_"
    server_url: str | None = Field(
        None, description="Base URL of a Kimina Lean server (it answers POST /api/check); unset: lean is unavailable.")
    api_key: SecretStr | None = Field(
        None, description="The server's API key (LEAN_SERVER_API_KEY there; never logged).")
    api: Literal["check", "verify"] = Field(
        "check", description="check: POST /api/check (Kimina server 2.x); verify: POST /verify (server 1.x).")
    timeout_s: int = Field(60, ge=1, le=3600, description="Lean time limit per proof, sent with each batch.")
    http_timeout_s: float = Field(
        900.0, gt=0, description="How long one batch request may take (at least the Lean time limit + 30s).")
    max_batch: int = Field(32, ge=1, le=1024, description="Snippets in one POST /api/check.")
    batch_wait_ms: float = Field(20.0, ge=0, description="How long a check waits for others to share its batch.")
    max_concurrency: int = Field(4, ge=1, description="Batch requests in flight at once.")
    max_retries: int = Field(2, ge=0, description="Retries on 429/5xx/connection errors (jittered backoff).")


class ModelSettings(Block):
    specs: list[ModelSpec] = Field(
        default_factory=list, alias="reward_models",
        description="Process/outcome reward models loaded at start-up (docs/reward-models.md).")


class CalibrationSettings(Block):
    """Calibration store and appeals (audits write into the same store)."""

    prefix = "calibration_"
    db: str = Field(
        "~/.local/state/reward-service/calibration.sqlite3",
        description="SQLite file of the calibration store (FP/FN counts per verifier configuration, appeal counters).",
    )
    appeal_judge: str | None = Field(
        None, alias="appeal_judge", description="Default judge verifier for options.appeal.")
    min_appeals: int = Field(30, ge=1, description="Appeals needed before the online FN rate is used.")
    wide_interval: float = Field(
        0.2, gt=0, le=1,
        description="A noise rate whose 95% interval is wider than this gets a warning in the verdict.")


class OpenRLHFSettings(Block):
    prefix = "openrlhf_"
    verifier: str = Field("math", description="Verifier that scores /openrlhf/reward requests.")
    options: dict[str, Any] = Field(default_factory=dict, description="Options for that verifier.")
    null_reward: float = Field(
        0.0, description="Reward sent to OpenRLHF (which only takes floats) for a verdict with a null score.")
    strip_suffixes: list[str] = Field(
        default_factory=lambda: ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>",
                                 "<｜end▁of▁sentence｜>", "<|end|>"],
        description="End-of-turn tokens removed from the end of a decoded OpenRLHF query before scoring.",
    )


class CompositionSettings(Block):
    reward_specs: dict[str, Any] = Field(
        default_factory=dict,
        description="Named reward specs: name -> {components: [...], normalize: bool}; used as verifier 'spec:NAME'.",
    )


class ShapingSettings(Block):
    length_tokenizers: dict[str, str] = Field(
        default_factory=dict, description="Tokenizer name -> local directory, for the length verifier's unit=tokens.")
    embedding_models: dict[str, str] = Field(
        default_factory=dict, description="Sentence-embedding model name -> local directory, for text_similarity's "
        "metric embedding.")


class SqlSettings(Block):
    prefix = "sql_"
    databases_dir: str = Field(
        "", description="Directory of the sql verifier's SQLite databases (NAME/NAME.sqlite or NAME.sqlite).")


class EnvironmentsSettings(Block):
    """Sessions of the environments mounted at /envs/{name} (docs/environments.md)."""

    prefix = "env_"
    idle_ttl_s: float = Field(900.0, gt=0, description="A session idle this long is reaped.")
    lifetime_s: float = Field(3600.0, gt=0, description="A session older than this is reaped, busy or not.")
    max_sessions: int = Field(1024, ge=1, description="Sessions open at once on this instance; beyond: 429.")
    max_sessions_per_client: int = Field(256, ge=1, description="Sessions one client (its address) holds; beyond: 429.")
    step_timeout_s: float = Field(30.0, gt=0, description="A step's time limit when it names none.")
    max_step_timeout_s: float = Field(300.0, gt=0, description="The longest time limit a step may ask for.")
    instance_id: str = Field("", pattern=r"^[A-Za-z0-9_.]{0,32}$",
                             description="This instance's id in session ids (no '-'); empty: drawn at start.")
    modules: list[str] = Field(default_factory=list, description="Extra modules exporting ENVIRONMENTS.")
    python_memory_mb: int = Field(512, ge=16, description="Memory of one python session (its whole life).")
    python_disk_mb: int = Field(64, ge=1, description="Work-dir tmpfs of one python session.")
    python_processes: int = Field(32, ge=2, description="Processes one python session may hold at once.")
    python_cpu_s: float = Field(600.0, gt=0, description="CPU seconds of one python session, all steps together.")
    python_output_bytes: int = Field(65536, ge=1024, description="stdout and stderr kept of one step, each.")
    python_network: Literal["none", "loopback"] = Field("none", description="none: no sockets but unix ones.")
    session_warm_pool: int = Field(4, ge=0, description="Sandboxes started ahead for new python sessions.")
    bfcl_warm_workers: int = Field(4, ge=0, description="bfcl worker processes kept started ahead, from the first "
                                                        "bfcl reset on; 0: each reset starts its own.")
    sql_max_rows: int = Field(200, ge=1, description="Rows one sql step returns at most.")


class JobsSettings(Block):
    """Jobs (``/v1/jobs``): batches accepted at once and scored in the background (docs/api.md#jobs)."""

    prefix = "jobs_"
    store: str = Field(
        "~/.local/state/reward-service/jobs.sqlite3",
        description="SQLite file keeping accepted items and finished verdicts, so jobs survive a restart; 'off' or "
        "empty: memory only (after a restart a job's id answers 410 'lost').")
    ttl_s: float = Field(3600.0, gt=0, description="How long a job's results are kept after its last verdict.")
    max_jobs_per_client: int = Field(64, ge=1, description="Unfinished jobs one client may have; beyond: 429.")
    max_queued_items: int = Field(
        100_000, ge=1, description="Items of unfinished jobs not yet decided, all clients together; beyond: 429 "
        "(413 for one job larger than it).")
    max_stored_results: int = Field(
        1_000_000, ge=1, description="Items held (unfinished jobs, and finished ones until their TTL); beyond: 429.")


# Block name -> its model: the fields of ``Settings``, in this order.
BLOCKS: dict[str, type[Block]] = {
    "server": ServerSettings,
    "auth": AuthSettings,
    "execution": ExecutionSettings,
    "limits": LimitsSettings,
    "sandbox": SandboxSettings,
    "judges": JudgeSettings,
    "lean": LeanSettings,
    "models": ModelSettings,
    "calibration": CalibrationSettings,
    "openrlhf": OpenRLHFSettings,
    "composition": CompositionSettings,
    "shaping": ShapingSettings,
    "sql": SqlSettings,
    "environments": EnvironmentsSettings,
    "jobs": JobsSettings,
}

# Flat name (file key; environment variable without the prefix, lower case) -> (block, field).
FLAT_NAMES: dict[str, tuple[str, str]] = {
    flat: (block, name) for block, model in BLOCKS.items() for flat, name in model.flat_names().items()
}
assert not set(FLAT_NAMES) & set(BLOCKS), "a flat name must not be a block name"
assert len(FLAT_NAMES) == sum(len(m.model_fields) for m in BLOCKS.values()), "two fields share a flat name"


def regroup(values: dict[str, Any]) -> dict[str, Any]:
    """Flat names moved into their blocks; other keys (blocks, or unknown names that validation refuses) kept."""
    out = {key: value for key, value in values.items() if key not in FLAT_NAMES}
    for key, value in values.items():
        if key not in FLAT_NAMES:
            continue
        block, name = FLAT_NAMES[key]
        given = out.get(block)
        if isinstance(given, BaseModel):
            given = given.model_dump(exclude_unset=True)
        out[block] = {**(given if isinstance(given, dict) else {}), name: value}
    return out


class _FlatEnvironment(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", env_nested_delimiter="__",
                                      validate_default=False)  # an unset name stays None and is left out


@cache
def _flat_environment_model() -> type[BaseSettings]:
    """A settings class with every flat name and its type, so pydantic-settings parses the environment exactly as
    it did when ``Settings`` was one flat class (JSON for lists and mappings, ``__`` into nested models)."""
    fields: dict[str, Any] = {}
    for flat, (block, name) in FLAT_NAMES.items():
        info: FieldInfo = BLOCKS[block].model_fields[name]
        fields[flat] = (info.annotation, None)
    return create_model("FlatEnvironment", __base__=_FlatEnvironment, **fields)


def environment_values() -> dict[str, Any]:
    """What the ``REWARD_SERVICE_*`` environment sets, by flat name."""
    return _flat_environment_model()().model_dump(exclude_unset=True)


class _FlatEnvironmentSource(PydanticBaseSettingsSource):
    """The environment, read under the flat names and regrouped into blocks."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every flat name at once

    def __call__(self) -> dict[str, Any]:
        return regroup(environment_values())


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    server: ServerSettings = Field(default_factory=ServerSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    judges: JudgeSettings = Field(default_factory=JudgeSettings)
    lean: LeanSettings = Field(default_factory=LeanSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    calibration: CalibrationSettings = Field(default_factory=CalibrationSettings)
    openrlhf: OpenRLHFSettings = Field(default_factory=OpenRLHFSettings)
    composition: CompositionSettings = Field(default_factory=CompositionSettings)
    shaping: ShapingSettings = Field(default_factory=ShapingSettings)
    sql: SqlSettings = Field(default_factory=SqlSettings)
    environments: EnvironmentsSettings = Field(default_factory=EnvironmentsSettings)
    jobs: JobsSettings = Field(default_factory=JobsSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _FlatEnvironmentSource(settings_cls)  # arguments first, then the environment

    @model_validator(mode="before")
    @classmethod
    def _regroup(cls, data: Any) -> Any:
        return regroup(data) if isinstance(data, dict) else data

    def effective_workers(self) -> int:
        return self.execution.workers or os.cpu_count() or 1


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
    """Defaults < config file < environment < explicit overrides (CLI flags), each by flat name."""
    path = config_file or os.environ.get(CONFIG_ENV)
    file_values = _read_file(Path(path)) if path else {}
    merged = {**file_values, **environment_values(), **{k: v for k, v in overrides.items() if v is not None}}
    return Settings.model_validate(merged) if merged else Settings()
