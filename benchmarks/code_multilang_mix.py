"""The multilingual mix of ``benchmarks/code_throughput.py --dataset multilang``: MultiPL-E's tests with the
hand-written solutions in its ten languages and HumanEval-X's canonical solutions in C++, Java and JavaScript, as
code-verifier items, and the same programs run bare with each language's own commands (compile, then run; pass =
exit 0), no sandbox and no server."""
from __future__ import annotations

import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._common import SHARED_DATA
from tests.support.multilang import (
    SOLUTIONS,
    bare_passes,
    fixed_prompt,
    humaneval_x,
    humaneval_x_reference,
    multipl_e,
    multipl_e_reference,
)
from verifiers.kinds.code.appended import assemble_appended

# HumanEval-X languages run bare by the same BARE table's shape: (file, compile, run)
_HEX_BARE = {"cpp": ("main.cpp", ["g++", "-O2", "-o", "main", "main.cpp"], ["./main"]),
             "java": ("Main.java", ["javac", "Main.java"], ["java", "-ea", "Main"]),
             "js": ("main.js", [], ["node", "main.js"])}


def load_multilang(per_language: int) -> list[tuple[str, dict[str, Any], tuple[str, str]]]:
    """(response, reference, (bare language key, the whole program)) rows."""
    rows = []
    for lang in ("ts", "cs", "php", "lua", "r", "pl", "rb", "scala", "rkt", "d"):
        tasks = multipl_e(SHARED_DATA, lang)
        for name, bodies in SOLUTIONS.items():
            reference = multipl_e_reference(lang, tasks[name])
            program = assemble_appended(reference["language"], fixed_prompt(lang, tasks[name]["prompt"]),
                                        bodies[lang], tasks[name]["tests"])
            rows.append((bodies[lang], reference, (lang, program)))
    for lang in _HEX_BARE:
        for task in humaneval_x(SHARED_DATA, lang)[:per_language]:
            reference = humaneval_x_reference(task, lang)
            program = assemble_appended(reference["language"], reference["prompt"], task["canonical_solution"],
                                        reference["test"])
            rows.append((task["canonical_solution"], reference, (lang, program)))
    return rows


def _bare_one(lang: str, program: str) -> bool:
    if lang in _HEX_BARE:
        name, compile_argv, run_argv = _HEX_BARE[lang]
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, name).write_text(program)
            if compile_argv and subprocess.run(compile_argv, cwd=tmp, capture_output=True).returncode != 0:
                return False
            done = subprocess.run(run_argv, cwd=tmp, capture_output=True, text=True, timeout=120)
            return done.returncode == 0 and "Assertion failed" not in done.stderr
    return bare_passes(lang, program)


def bare_multilang(rows: list, parallel: int) -> tuple[float, int, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(lambda row: _bare_one(*row[2]), rows))
    return time.perf_counter() - start, len(rows), sum(results)
