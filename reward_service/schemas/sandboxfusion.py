"""SandboxFusion's ``/run_code`` wire format, its language names, and how our ``RunResult`` reads in it.

verl (``verl.utils.reward_score.sandbox_fusion``) and other SandboxFusion clients decide a test case from these fields
only: top-level ``status`` (Success/Failed/SandboxError), ``compile_result`` (present for compiled languages) and
``run_result`` (absent when compilation failed), each with ``status`` Finished/Error/TimeLimitExceeded and
``return_code``. The mapping keeps the three apart: the program's fault is Failed, time is TimeLimitExceeded,
and a fault of ours is SandboxError, never a verdict on the program. See docs/sandboxfusion.md.
"""
from __future__ import annotations

import enum
import math
import signal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sandbox.api import RunResult, RunStatus

# SandboxFusion's language names -> ours; None: SandboxFusion knows it, this server does not offer it.
SANDBOXFUSION_LANGUAGES: dict[str, str | None] = {
    "python": "python", "cpp": "cpp", "nodejs": "javascript", "go": "go", "java": "java", "bash": "bash",
    "rust": "rust", "go_test": "go_test", "php": "php", "csharp": "csharp", "typescript": "typescript", "lua": "lua",
    "R": "r", "perl": "perl", "D_ut": "d", "ruby": "ruby", "scala": "scala", "pytest": "pytest", "junit": "junit",
    "kotlin_script": "kotlin_script", "verilog": "verilog", "racket": "racket", "jest": "jest",
    # no toolchain a registry here supplies (julia, swift, cuda, python_gpu), or served elsewhere (sql: the sql
    # verifier; lean: the lean verifier)
    **{name: None for name in ("sql", "cuda", "julia", "python_gpu", "lean", "swift")},
}
# Our own names, accepted too (a superset: SandboxFusion refuses these with 422).
EXTRA_LANGUAGES: dict[str, str] = {name: name for name in (
    "c", "javascript", "kotlin", "d", "r", "rust_test", "haskell", "ocaml", "elixir", "fortran")}
NO_MEMORY_LIMIT = -1  # SandboxFusion's default memory_limit_MB: "no limit"; here the server's default limit


class CommandStatus(str, enum.Enum):
    FINISHED = "Finished"  # the process ran to its end (any return code)
    ERROR = "Error"  # the sandbox could not run it
    TIME_LIMIT_EXCEEDED = "TimeLimitExceeded"


class ApiStatus(str, enum.Enum):
    SUCCESS = "Success"  # every step finished with return code 0
    FAILED = "Failed"  # a step exited non-zero, was killed, or ran out of time
    SANDBOX_ERROR = "SandboxError"  # our fault: the case tells nothing about the program


class RunCodeRequest(BaseModel):
    """SandboxFusion's request. Unknown fields are ignored, as SandboxFusion does (clients add fields over time)."""

    model_config = ConfigDict(extra="ignore")

    code: str = Field(..., description="The program source.")
    language: str = Field(..., description="A SandboxFusion language name (python, cpp, nodejs, java, ...).")
    compile_timeout: float = Field(10, gt=0, allow_inf_nan=False,
                                   description="Seconds; must not exceed the server's compile budget.")
    run_timeout: float = Field(10, gt=0, allow_inf_nan=False, description="Wall-clock seconds of the run.")
    memory_limit_MB: int = Field(NO_MEMORY_LIMIT, description="MiB; -1 (the default) takes the server's default.")
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict, description="Path -> base64 content; null: skipped.")
    fetch_files: list[str] = Field(default_factory=list, description="Work-dir files returned base64 in `files`.")
    args: list[str] = Field(default_factory=list, description="SandboxFusion passes these to pytest only; ignored.")

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        if value not in SANDBOXFUSION_LANGUAGES and value not in EXTRA_LANGUAGES:
            raise ValueError(f"unknown language {value!r}; SandboxFusion names: {', '.join(SANDBOXFUSION_LANGUAGES)}")
        return value

    @field_validator("memory_limit_MB")
    @classmethod
    def _memory(cls, value: int) -> int:
        if value != NO_MEMORY_LIMIT and value <= 0:
            raise ValueError(f"must be positive, or {NO_MEMORY_LIMIT} for the server default (got {value})")
        return value

    def our_language(self) -> str | None:
        return EXTRA_LANGUAGES.get(self.language) or SANDBOXFUSION_LANGUAGES.get(self.language)


class CommandRunResult(BaseModel):
    status: CommandStatus
    execution_time: float | None = Field(None, description="Seconds; null where we do not measure it alone.")
    return_code: int | None = Field(None, description="Null on TimeLimitExceeded; -N when killed by signal N.")
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    status: ApiStatus
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict, description="fetch_files that existed, base64.")

    @classmethod
    def sandbox_error(cls, message: str, pod: str | None = None) -> RunCodeResponse:
        return cls(status=ApiStatus.SANDBOX_ERROR, message=message, executor_pod_name=pod,
                   run_result=CommandRunResult(status=CommandStatus.ERROR, stderr=message))


def _seconds(ms: float) -> float | None:
    return round(ms / 1000.0, 6) if ms and math.isfinite(ms) else None


def _return_code(result: RunResult) -> int:
    """Python's convention, as SandboxFusion reports it: -N for a kill by signal N. Never 0 for a failed run."""
    if result.signal:
        return -result.signal
    if result.exit_code:
        return result.exit_code
    return 0 if result.status is RunStatus.OK else -9  # stopped by a limit with no code of its own: SIGKILL


def _compile_step(result: RunResult) -> tuple[CommandRunResult, bool]:
    """The compile step of a compiled language, and whether the program went on to run."""
    if result.status is not RunStatus.COMPILE_ERROR:
        return CommandRunResult(status=CommandStatus.FINISHED, return_code=0, stdout="",
                                stderr=result.compile_output), True
    output = result.compile_output or result.stderr
    if (result.exit_code is None and result.signal is None) or result.signal == signal.SIGXCPU:  # compile budget
        return CommandRunResult(status=CommandStatus.TIME_LIMIT_EXCEEDED, execution_time=_seconds(result.wall_ms),
                                stdout=result.stdout, stderr=output), False
    code = -result.signal if result.signal else (result.exit_code or 1)
    return CommandRunResult(status=CommandStatus.FINISHED, execution_time=_seconds(result.wall_ms), return_code=code,
                            stdout="", stderr=output), False


def _run_step(result: RunResult) -> CommandRunResult:
    if result.status is RunStatus.TIMEOUT:
        return CommandRunResult(status=CommandStatus.TIME_LIMIT_EXCEEDED, execution_time=_seconds(result.wall_ms),
                                stdout=result.stdout, stderr=result.stderr)
    return CommandRunResult(status=CommandStatus.FINISHED, execution_time=_seconds(result.wall_ms),
                            return_code=_return_code(result), stdout=result.stdout, stderr=result.stderr)


def to_response(result: RunResult, compiled: bool, files: dict[str, str], pod: str | None = None) -> RunCodeResponse:
    """One ``RunResult`` as SandboxFusion would have answered; ``files`` are the fetched files, already base64."""
    if result.status in (RunStatus.SANDBOX_ERROR, RunStatus.CANCELLED):  # never the program's verdict
        return RunCodeResponse.sandbox_error(result.reason or "the sandbox failed", pod)
    compiled = compiled or result.status is RunStatus.COMPILE_ERROR
    compile_result, ran = _compile_step(result) if compiled else (None, True)
    run_result = _run_step(result) if ran else None
    ok = result.status is RunStatus.OK and run_result is not None and run_result.return_code == 0
    return RunCodeResponse(status=ApiStatus.SUCCESS if ok else ApiStatus.FAILED, message="" if ok else result.reason,
                           compile_result=compile_result, run_result=run_result, executor_pod_name=pod, files=files)
