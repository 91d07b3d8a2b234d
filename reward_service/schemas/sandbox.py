"""Wire models of the sandbox API and its settings; they mirror ``sandbox.api`` (plain dataclasses inside)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sandbox.api import Limits, RunRequest, RunResult


class SandboxLimits(BaseModel):
    """Run limits. In a request every field is optional and must stay within the server's caps."""

    model_config = ConfigDict(extra="forbid")

    wall_s: float = Field(10.0, gt=0, allow_inf_nan=False,
                          description="Wall-clock seconds for the run (compilation has its own budget). Left out of "
                                      "a request: a backstop of 3 x cpu_s + 2 s (at least the server's default, at "
                                      "most its cap), so the CPU budget decides.")
    cpu_s: float = Field(10.0, gt=0, allow_inf_nan=False,
                         description="CPU seconds of the run: each process's, and all its processes' together.")
    memory_mb: int = Field(1024, gt=0, description="Address space (or data segment for JVM/V8/Go) in MiB.")
    processes: int = Field(64, gt=0, description="Processes/threads the program may have at once.")
    file_size_mb: int = Field(64, gt=0, description="Largest file the program may write.")
    open_files: int = Field(256, gt=0, description="Open file descriptors.")
    output_bytes: int = Field(1 << 20, gt=0, description="Per stream; beyond it: output_exceeded, truncated.")
    disk_mb: int = Field(256, gt=0, description="Size of the private work dir.")

    def to_limits(self) -> Limits:
        return Limits(**self.model_dump())


def default_caps() -> SandboxLimits:
    return SandboxLimits(wall_s=60, cpu_s=60, memory_mb=4096, processes=256, file_size_mb=256, open_files=1024,
                         output_bytes=16 << 20, disk_mb=1024)


class LimitsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    wall_s: float | None = Field(None, allow_inf_nan=False)
    cpu_s: float | None = Field(None, allow_inf_nan=False)
    memory_mb: int | None = None
    processes: int | None = None
    file_size_mb: int | None = None
    open_files: int | None = None
    output_bytes: int | None = None
    disk_mb: int | None = None


class RunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, description="Echoed back in the result.")
    code: str = Field(..., description="Program source.")
    language: str = Field("python", description="See GET /v1/sandbox/languages.")
    stdin: str = ""
    args: list[str] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict, description="Extra files (relative paths) in the work dir.")
    collect: list[str] = Field(default_factory=list, description="Work-dir files to read back after the run.")
    limits: LimitsIn = Field(default_factory=LimitsIn, description="Omitted fields take the server defaults.")
    network: Literal["loopback", "none"] = Field(
        "loopback", description="loopback: a network of the run's own, loopback only (127.0.0.1 and ::1); none: unix "
                                "sockets only, and a lighter run")

    def to_request(self, language: str, limits: Limits) -> RunRequest:
        return RunRequest(code=self.code, language=language, stdin=self.stdin, args=list(self.args),
                          files=dict(self.files), collect=list(self.collect), limits=limits, network=self.network)


class RunBatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[RunIn]


class RunOut(BaseModel):
    id: str | None = None
    status: str = Field(description="ok|runtime_error|compile_error|timeout|memory_exceeded|output_exceeded|"
                                    "sandbox_error|cancelled")
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    wall_ms: float
    cpu_ms: float
    max_rss_kb: int
    truncated: bool
    compile_output: str = ""
    files: dict[str, str] = Field(default_factory=dict)
    reason: str = ""

    @classmethod
    def of(cls, result: RunResult, id: str | None = None) -> RunOut:
        data: dict[str, Any] = asdict(result)
        data["status"] = result.status.value
        data["wall_ms"] = round(result.wall_ms, 3)
        data["cpu_ms"] = round(result.cpu_ms, 3)
        return cls(id=id, **data)


class RunBatchOut(BaseModel):
    results: list[RunOut]


class LanguageOut(BaseModel):
    available: bool
    compiled: bool = False
    file: str = ""
    aliases: list[str] = Field(default_factory=list)
    reason: str = ""
    version: str = ""  # the toolchain's own version line (e.g. "go version go1.19.8 linux/amd64")
    assertions: str = ""  # what a failed assertion is in this language and how the sandbox keeps it a failure
