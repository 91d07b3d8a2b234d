"""Languages bound to this host: the rows of ``sandbox.language_table`` with their tools resolved.

Tool names are resolved on the host (real paths, never shims) when the backend starts, and a language whose tools are
missing is reported unavailable instead of failing at run time.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.language_spec import SUPPORT_DIR, SUPPORT_IN_SANDBOX, Language
from sandbox.language_table import LANGUAGES

__all__ = ["LANGUAGES", "SUPPORT_DIR", "Language", "ResolvedLanguage", "canonical_name", "resolve", "resolve_all",
           "source_file", "version_of"]


@dataclass
class ResolvedLanguage:
    """A language bound to this host: absolute tool paths and the directories the sandbox must see."""

    spec: Language
    available: bool
    tools: dict[str, str] = field(default_factory=dict)
    binds: tuple[str, ...] = ()
    reason: str = ""

    def command(self, template: tuple[str, ...], code: str, mem_mb: int, python: str = sys.executable,
                tools: dict[str, str] | None = None, python_path: tuple[str, ...] = ()) -> list[str]:
        """The argv of one step; ``python`` and ``tools`` as the sandbox sees them (they may be bound elsewhere)."""
        paths = tools if tools is not None else self.tools
        values = self._values(code, mem_mb, python, python_path)
        # the tool is the step's first word; later words are arguments even where one spells a tool ("--types node")
        return [paths[part] if i == 0 and part in paths else part.format(**values) for i, part in enumerate(template)]

    def environment(self, code: str, mem_mb: int, python: str = sys.executable,
                    python_path: tuple[str, ...] = ()) -> dict[str, str]:
        """The language's own environment variables, their placeholders filled as for its commands."""
        values = self._values(code, mem_mb, python, python_path)
        return {key: value.format(**values) for key, value in self.spec.env}

    def _values(self, code: str, mem_mb: int, python: str, python_path: tuple[str, ...]) -> dict[str, object]:
        return {"python": python, "src": self.spec.file_for(code), "mem": mem_mb, "heap": max(16, mem_mb * 3 // 4),
                "jvm_heap": max(16, mem_mb // 2),
                "jvm_stack": min(64, max(4, mem_mb // 32)), "main": self.spec.main_name(code),
                "support": SUPPORT_IN_SANDBOX,
                "pythonpath": os.pathsep.join(python_path)}


def _rust_binds(rustc: str) -> list[str]:
    """``rustc`` on PATH is usually a rustup proxy; bind and use the real toolchain instead."""
    try:
        sysroot = subprocess.run([rustc, "--print", "sysroot"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [sysroot.strip()] if sysroot.strip() else []


def resolve(spec: Language) -> ResolvedLanguage:
    tools: dict[str, str] = {}
    binds: list[str] = []
    for tool in spec.tools:
        found = shutil.which(tool)
        if not found:
            return ResolvedLanguage(spec, False, reason=f"{tool} not found on PATH")
        real = os.path.realpath(found)
        if tool == "rustc":
            roots = _rust_binds(found)
            if not roots:
                return ResolvedLanguage(spec, False, reason="rustc has no sysroot")
            real = os.path.join(roots[0], "bin", "rustc")
            binds.extend(roots)
        tools[tool] = real
        binds.append(str(Path(real).parent.parent))  # the tool's installation prefix (lib/ beside bin/)
    for required in spec.requires:
        if not os.path.exists(required):
            return ResolvedLanguage(spec, False, reason=f"{required} is not installed (scripts/setup.sh installs it)")
    return ResolvedLanguage(spec, True, tools, tuple(binds))


@functools.cache
def version_of(name: str) -> str:
    """The first line its toolchain prints for its version on this host ("" when it prints none); run once per
    process, on demand (a JVM compiler's takes a second)."""
    spec = next((s for s in LANGUAGES if s.name == name), None)
    if spec is None or not spec.version:
        return ""
    argv = [sys.executable if part == "{python}" else part for part in spec.version]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if line.strip() and "warning" not in line.lower() and "picked up" not in line.lower():
            return line.strip()[:200]
    return ""


def resolve_all(enabled: list[str] | None = None) -> dict[str, ResolvedLanguage]:
    out = {}
    for spec in LANGUAGES:
        if enabled is not None and spec.name not in enabled:
            continue
        out[spec.name] = resolve(spec)
    return out


def canonical_name(name: str) -> str:
    lowered = name.strip().lower()
    for spec in LANGUAGES:
        if lowered == spec.name or lowered in spec.aliases:
            return spec.name
    return lowered


def source_file(name: str, code: str) -> str:
    """The file the program itself is written to (``Main.java`` follows its public class)."""
    canonical = canonical_name(name)
    for spec in LANGUAGES:
        if spec.name == canonical:
            return spec.file_for(code)
    return ""
