"""SandboxFusion's ``/run_jupyter`` wire format: cells run in order in one Python interpreter, one result per cell."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reward_service.schemas.sandboxfusion import NO_MEMORY_LIMIT, ApiStatus, CommandRunResult


class RunJupyterRequest(BaseModel):
    """SandboxFusion's request; unknown fields are ignored, as SandboxFusion does."""

    model_config = ConfigDict(extra="ignore")

    cells: list[str] = Field(..., description="Code cells, run in order in one interpreter.")
    cell_timeout: float = Field(0, ge=0, allow_inf_nan=False, description="Seconds per cell; 0: no per-cell limit.")
    total_timeout: float = Field(45, gt=0, allow_inf_nan=False,
                                 description="Seconds for all the cells; over the server cap it is clamped.")
    kernel: Literal["python3"] = "python3"
    memory_limit_MB: int = Field(NO_MEMORY_LIMIT, description="MiB; -1 (the default) takes the server's default.")
    files: dict[str, str | None] = Field(default_factory=dict, description="Path -> base64 content; null: skipped.")
    fetch_files: list[str] = Field(default_factory=list, description="Work-dir files returned base64 in `files`.")


class CellRunResult(BaseModel):
    stdout: str = ""
    stderr: str = ""
    display: list[dict[str, Any]] = Field(default_factory=list, description="MIME bundles: the last expression's "
                                          "value as {'text/plain': repr}.")
    error: list[dict[str, Any]] = Field(default_factory=list, description="{ename, evalue, traceback} of an "
                                        "exception the cell raised.")


class RunJupyterResponse(BaseModel):
    status: ApiStatus
    message: str = ""
    driver: CommandRunResult | None = None
    cells: list[CellRunResult] = Field(default_factory=list)
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
