"""HumanEval-X and MultiPL-E as code-verifier references, hand-written MultiPL-E solutions, and each language's own
commands for running a program bare (outside the sandbox), to compare verdicts with."""
from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

HUMANEVAL_X = ("cpp", "go", "java", "js", "python", "rust")
MULTIPL_E = ("ts", "cs", "php", "lua", "r", "pl", "rb", "scala", "rkt", "d")
SANDBOX_LANGUAGE = {"cpp": "cpp", "go": "go_test", "java": "java", "js": "javascript", "python": "python",
                    "rust": "rust_test", "ts": "typescript", "cs": "csharp", "php": "php", "lua": "lua", "r": "r",
                    "pl": "perl", "rb": "ruby", "scala": "scala", "rkt": "racket", "d": "d"}
# HumanEval-X's Rust declarations `use` rand, regex and md5, which the sandbox links (scripts/rust_crates.sh); the
# problems whose canonical solutions call them (91: Regex, 162: md5) join the sample.
RUST_CRATE_PROBLEMS = {91: "Regex::new", 162: "md5::compute"}


def humaneval_x(data: Path, lang: str) -> list[dict[str, Any]]:
    with gzip.open(data / "code" / "humaneval-x" / f"humaneval_{lang}.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def humaneval_x_reference(task: dict[str, Any], lang: str) -> dict[str, Any]:
    if lang == "python":
        entry = re.findall(r"^def (\w+)\(", task["declaration"], re.M)  # the last: helpers come first
        assert entry
        return {"test": task["test"], "entry_point": entry[-1], "prompt": task["prompt"]}
    prompt = task["prompt"]
    if lang == "go":  # the test's package clause and imports, then the prompt without the imports they repeat
        setup = set(re.findall(r'"([^"]+)"', task["test_setup"]))
        imports = "".join(line + "\n" for line in task["import"].splitlines()
                          if not set(re.findall(r'"([^"]+)"', line)) & setup)
        prompt = task["test_setup"] + prompt.replace(task["import"], imports)
    if lang == "rust":
        prompt = prompt + task["declaration"]
    return {"language": SANDBOX_LANGUAGE[lang], "prompt": prompt, "test": task["test"]}


# Canonical solutions that fail their own tests, run bare with the data set's commands too (node prints "Assertion
# failed" for each failed console.assert): a verifier must fail them.
KNOWN_FAILING = {"js": {112, 155, 162}}


# The crate-using Rust problems with wrong bodies that compile and still call the crate
BROKEN_RUST_CRATES = {
    91: '    Regex::new(r"[.?!]").unwrap().split(s).filter(|x| x.starts_with("I")).count() as i32\n}\n',
    162: '    format!("{:x}", md5::compute(text.to_uppercase().as_bytes()))\n}\n',
}


# HumanEval/2 (truncate_number) with a wrong body that compiles: the floor instead of the fraction
BROKEN_TRUNCATE = {
    "cpp": "    return floor(number);\n}\n",
    "go": "    return math.Floor(number)\n}\n",
    "java": "        return Math.floor(number);\n    }\n}\n",
    "js": "  return Math.floor(number);\n}\n",
    "python": "    return float(int(number))\n",
    "rust": "    return number.floor();\n}\n",
}


def multipl_e(data: Path, lang: str) -> dict[str, dict[str, Any]]:
    with open(data / "code" / "multipl-e" / f"humaneval-{lang}-reworded.jsonl") as f:
        return {r["name"]: r for r in map(json.loads, f)}


_COMMENT = {"ts": "//", "php": "//", "pl": "#", "rb": "#", "scala": "//"}


def fixed_prompt(lang: str, prompt: str) -> str:
    """The prompt with its doc comment's continuation lines commented (the stored ts, php, pl, rb and scala prompts
    comment only the first; see code/multipl-e/README.md)."""
    marker = _COMMENT.get(lang)
    if marker is None:
        return prompt
    lines = prompt.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip().startswith(marker)), None)
    signature = next((i for i in range(len(lines) - 1, -1, -1)
                      if re.match(r"\s*(function|sub|def)\b", lines[i])), None)
    if first is None or signature is None:
        return prompt
    for i in range(first + 1, signature):
        if not lines[i].strip().startswith(marker):
            lines[i] = marker + " " + lines[i]
    return "\n".join(lines)


def multipl_e_reference(lang: str, task: dict[str, Any]) -> dict[str, Any]:
    return {"language": SANDBOX_LANGUAGE[lang], "prompt": fixed_prompt(lang, task["prompt"]), "tests": task["tests"]}


# Hand-written bodies (the prompt's continuation) for two problems in every MultiPL-E language.
SOLUTIONS: dict[str, dict[str, str]] = {
    "HumanEval_13_greatest_common_divisor": {
        "ts": "  while (b !== 0) { const t = a % b; a = b; b = t; }\n  return a;\n}\n",
        "cs": "        while (b != 0) { long t = a % b; a = b; b = t; }\n        return a;\n",
        "php": "    while ($b != 0) { $t = $a % $b; $a = $b; $b = $t; }\n    return $a;\n}\n",
        "lua": "  while b ~= 0 do a, b = b, a % b end\n  return a\nend\n",
        "r": "  while (b != 0) { t <- a %% b; a <- b; b <- t }\n  a\n}\n",
        "pl": "    while ($b != 0) { ($a, $b) = ($b, $a % $b); }\n    return $a;\n}\n",
        "rb": "  b == 0 ? a : greatest_common_divisor(b, a % b)\nend\n",
        "scala": "        if (b == 0) a else greatestCommonDivisor(b, a % b)\n",
        "rkt": "  (if (= b 0) a (greatest_common_divisor b (modulo a b))))\n",
        "d": "{\n    while (b != 0) { auto t = a % b; a = b; b = t; }\n    return a;\n}\n",
    },
    "HumanEval_45_triangle_area": {
        "ts": "  return a * h / 2;\n}\n",
        "cs": "        return (float)(a * h) / 2;\n",
        "php": "    return $a * $h / 2.0;\n}\n",
        "lua": "  return a * h / 2\nend\n",
        "r": "  a * h / 2\n}\n",
        "pl": "    return $a * $h / 2;\n}\n",
        "rb": "  a * h / 2.0\nend\n",
        "scala": "        (a * h).toFloat / 2\n",
        "rkt": "  (/ (* a h) 2))\n",
        "d": "{\n    return a * h / 2.0f;\n}\n",
    },
}

# A wrong answer that still compiles and ends: gcd one too high, the triangle's area a third.
_GCD_WRONG = {"ts": ("return a;", "return a + 1;"), "cs": ("return a;", "return a + 1;"),
              "php": ("return $a;", "return $a + 1;"), "lua": ("return a\n", "return a + 1\n"),
              "r": ("  a\n}", "  a + 1\n}"), "pl": ("return $a;", "return $a + 1;"), "rb": ("? a :", "? a + 1 :"),
              "scala": ("== 0) a else", "== 0) a + 1 else"), "rkt": ("(= b 0) a", "(= b 0) (+ a 1)"),
              "d": ("return a;", "return a + 1;")}


def wrong_body(name: str, lang: str, body: str) -> str:
    if name == "HumanEval_13_greatest_common_divisor":
        old, new = _GCD_WRONG[lang]
        wrong = body.replace(old, new)
    else:
        wrong = body.replace("/ 2", "/ 3").replace("h) 2)", "h) 3)")
    assert wrong != body, (name, lang)
    return wrong


# How MultiPL-E's own evaluation runs each language (its evaluation/src/eval_*.py): (file, compile, run, failed when
# this appears on stderr even with exit 0).
BARE: dict[str, tuple[str, list[str], list[str], str]] = {
    "ts": ("main.ts", ["tsc", "--target", "esnext", "--module", "commonjs", "--lib", "esnext", "main.ts"],
           ["node", "main.js"], ""),
    "cs": ("main.cs", ["mcs", "-d:DEBUG", "-r:System.Numerics.dll", "-out:main.exe", "main.cs"], ["mono", "main.exe"],
           "DefaultTraceListener.Fail"),
    "php": ("main.php", [], ["php", "main.php"], ""),
    "lua": ("main.lua", [], ["lua5.4", "main.lua"], ""),
    "r": ("main.R", [], ["Rscript", "main.R"], ""),
    "pl": ("main.pl", [], ["perl", "main.pl"], ""),
    "rb": ("main.rb", [], ["ruby", "main.rb"], ""),
    "scala": ("Main.scala", ["scalac", "-d", ".", "Main.scala"], ["scala", "-cp", ".", "Problem"], ""),
    "rkt": ("main.rkt", [], ["racket", "main.rkt"], "FAILURE"),
    "d": ("main.d", ["ldc2", "-unittest", "-of=main", "main.d"], ["./main"], ""),
}


def bare_passes(lang: str, program: str, timeout_s: float = 120) -> bool:
    """Whether the program passes run outside the sandbox with the language's own commands."""
    name, compile_argv, run_argv, failure = BARE[lang]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, name).write_text(program)
        try:
            if compile_argv:
                built = subprocess.run(compile_argv, cwd=tmp, capture_output=True, text=True, timeout=timeout_s)
                if built.returncode != 0:
                    return False
            # MultiPL-E's C# runner sends Mono's trace (a failed Debug.Assert) to stderr and reads it there
            done = subprocess.run(run_argv, cwd=tmp, capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL, env={**os.environ, "MONO_TRACE_LISTENER": "Console.Error"})
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0 and not (failure and failure in done.stderr)
