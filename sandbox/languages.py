"""Declarative runner configs: one ``Language`` per language, so adding one is a config change.

Commands use ``{python}``, ``{src}`` and ``{mem}`` (the memory cap in MiB) placeholders; tool names are resolved on
the host (real paths, never shims) when the backend starts, and a language whose tools are missing is reported
unavailable instead of failing at run time.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Language:
    name: str
    source_file: str
    run: tuple[str, ...]
    compile: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # executables that must exist on PATH
    # "as": RLIMIT_AS (exact, for native code and CPython); "data": RLIMIT_DATA, for runtimes that reserve large
    # address ranges up front (V8, the JVM, Go) and die under an address-space cap.
    memory_rlimit: str = "as"
    env: tuple[tuple[str, str], ...] = ()
    compile_processes: int = 64  # compilers fork (gcc → cc1 → as → ld; go build runs a pool)
    inline_python: bool = False  # run in the warm interpreter instead of exec'ing a new one
    source_pattern: str = ""  # regex whose first group names the source file (Java's public class)
    aliases: tuple[str, ...] = ()

    def file_for(self, code: str) -> str:
        if self.source_pattern:
            m = re.search(self.source_pattern, code, re.M)
            if m:
                return self.source_file.replace("Main", m.group(1))
        return self.source_file

    def main_name(self, code: str) -> str:
        return Path(self.file_for(code)).stem


LANGUAGES: tuple[Language, ...] = (
    Language("python", "main.py", run=("{python}", "-S", "-I", "{src}"), inline_python=True,
             aliases=("python3", "py")),
    Language("c", "main.c", compile=("gcc", "-O2", "-std=gnu17", "-o", "main", "{src}", "-lm"), run=("./main",),
             tools=("gcc",)),
    Language("cpp", "main.cpp", compile=("g++", "-O2", "-std=gnu++17", "-o", "main", "{src}"), run=("./main",),
             tools=("g++",), aliases=("c++",)),
    Language("javascript", "main.js", run=("node", "--max-old-space-size={mem}", "{src}"), tools=("node",),
             memory_rlimit="data", aliases=("js", "node", "nodejs")),
    Language("java", "Main.java", compile=("javac", "-J-Xmx512m", "-encoding", "UTF-8", "{src}"),
             run=("java", "-Xmx{heap}m", "-Xss64m", "-XX:+UseSerialGC", "-cp", ".", "{main}"), tools=("javac", "java"),
             memory_rlimit="data", source_pattern=r"^\s*public\s+(?:final\s+)?class\s+(\w+)"),
    Language("go", "main.go", compile=("go", "build", "-o", "main", "{src}"), run=("./main",), tools=("go",),
             memory_rlimit="data",
             env=(("GOCACHE", "/tmp/go-cache"), ("GOPATH", "/tmp/go"), ("CGO_ENABLED", "0"), ("GOFLAGS", "-mod=mod"),
                  ("GO111MODULE", "off")), compile_processes=256, aliases=("golang",)),
    Language("rust", "main.rs", compile=("rustc", "-O", "--edition", "2021", "-o", "main", "{src}"), run=("./main",),
             tools=("rustc",), aliases=("rs",)),
    Language("bash", "main.sh", run=("bash", "{src}"), tools=("bash",), aliases=("sh", "shell")),
)


@dataclass
class ResolvedLanguage:
    """A language bound to this host: absolute tool paths and the directories the sandbox must see."""

    spec: Language
    available: bool
    tools: dict[str, str] = field(default_factory=dict)
    binds: tuple[str, ...] = ()
    reason: str = ""

    def command(self, template: tuple[str, ...], code: str, mem_mb: int, python: str = sys.executable,
                tools: dict[str, str] | None = None) -> list[str]:
        """The argv of one step; ``python`` and ``tools`` as the sandbox sees them (they may be bound elsewhere)."""
        src = self.spec.file_for(code)
        paths = tools if tools is not None else self.tools
        out = []
        for part in template:
            if part in paths:
                out.append(paths[part])
                continue
            out.append(part.format(python=python, src=src, mem=mem_mb, heap=max(16, mem_mb * 3 // 4),
                                   main=self.spec.main_name(code)))
        return out


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
    return ResolvedLanguage(spec, True, tools, tuple(binds))


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
