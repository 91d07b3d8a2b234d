"""One language's runner config: its files, its compile and run commands, its limits' shape and its version probe.

Commands use ``{python}``, ``{src}``, ``{main}`` (the source's stem), ``{mem}`` (the memory cap in MiB), ``{heap}``
(a managed runtime's heap, three quarters of the cap), ``{jvm_heap}`` and ``{jvm_stack}`` (the JVM's, in MiB),
``{pythonpath}`` (the site-packages the sandbox sees) and ``{support}`` (the sandbox's read-only support files: entry
points and preloads that make a failed assertion fail the run) placeholders; so may ``env``'s values.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SUPPORT_DIR = Path(__file__).with_name("support")  # bound read-only into every sandbox at SUPPORT_IN_SANDBOX
SUPPORT_IN_SANDBOX = "/.sandbox/support"


@dataclass(frozen=True)
class Language:
    name: str
    source_file: str
    run: tuple[str, ...]
    compile: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # executables that must exist on PATH
    requires: tuple[str, ...] = ()  # files set-up installs outside any tool's prefix (under /usr, seen read-only)
    # "as": RLIMIT_AS (exact, for native code and CPython); "data": RLIMIT_DATA, for runtimes that reserve large
    # address ranges up front (V8, the JVM, Go) and die under an address-space cap.
    memory_rlimit: str = "as"
    env: tuple[tuple[str, str], ...] = ()
    compile_processes: int = 64  # compilers fork (gcc → cc1 → as → ld; go build runs a pool)
    inline_python: bool = False  # run in the warm interpreter instead of exec'ing a new one
    source_pattern: str = ""  # regex whose first group names the source file (Java's public class)
    aliases: tuple[str, ...] = ()
    version: tuple[str, ...] = ()  # argv printing the toolchain's version on the host (first line kept)
    # What the language calls a failed assertion and how this config keeps it a failure (for docs and the tests).
    assertions: str = ""

    def file_for(self, code: str) -> str:
        if self.source_pattern:
            m = re.search(self.source_pattern, code, re.M)
            if m:
                return self.source_file.replace("Main", m.group(1))
        return self.source_file

    def main_name(self, code: str) -> str:
        return Path(self.file_for(code)).stem
