"""The ``code`` verifier: unit-test rewards with per-test results and weighted partial credit.

Python function/assert tests of one completion run in ONE sandbox run under the two-process harness
(``sandbox/inside/harness.py``); stdin/stdout cases go to the sandbox's batch mode (``run_cases``: one compile and
one sandbox start for many cases, each case still its own process with its own limits), batches of one item in
parallel, and are compared here, outside the sandbox, so the expected output never enters it. Many completions
run in parallel because the engine awaits every item's ``acheck`` concurrently and the sandbox backend queues the
runs.
"""
from __future__ import annotations

import ast
import asyncio
import json
import secrets
from dataclasses import replace
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

from sandbox.api import Backend, Limits, RunRequest, RunResult, RunStatus, run_source, wall_backstop
from sandbox.inside import HARNESS
from verifiers.base import BaseOptions, Verifier
from verifiers.context import SANDBOX, Context
from verifiers.kinds.code.appended import assemble_appended, unit_results
from verifiers.kinds.code.extract import extract_program
from verifiers.kinds.code.plan import BYTECODE_MAGIC, PARSE_ERRORS, TestPlan, build_plan
from verifiers.kinds.code.stdio import describe_mismatch, outputs_match
from verifiers.types import InvalidReference, Verdict, VerifierFailed, VerifierUnavailable

MESSAGE_CHARS = 300
STARTUP_S = 5.0  # judge + candidate interpreter start-up, on top of the tests' own budgets (CPU and wall)
CASES_PER_BATCH = 25  # stdin cases of one item per run_cases call; the calls of one item run in parallel


class CodeOptions(BaseOptions):
    stop_on_first_failure: bool = Field(False, description="Stop at the first failed test; the rest count as skipped.")
    test_timeout_s: float = Field(
        5.0, gt=0, le=600, description="Per-test CPU-time budget when the reference sets none (the program's processes "
                                       "together, and the test code's); a wall-clock backstop of 3x + 2 s ends a "
                                       "program that waits instead.")
    memory_mb: int = Field(1024, ge=64, le=16384, description="Memory cap per process in the sandbox.")
    network: Literal["none", "loopback"] = Field(
        "none", description="none: the program may open unix sockets only (no run of the sandbox needs a network "
                            "namespace of its own, which is a tenth of a short run's CPU); loopback: a network of "
                            "the run's own, loopback only, for tests that talk to a server the program starts.")


@lru_cache(maxsize=1)
def harness_source() -> str:
    return HARNESS.read_text()


def _defines(code: str, name: str) -> bool:
    try:
        module = ast.parse(code)
    except PARSE_ERRORS:  # the program is the policy's: one the parser refuses is run as it is, and fails there
        return False
    return any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name for s in module.body)


def assemble_program(plan: TestPlan, code: str) -> str:
    """HumanEval-style references may carry the prompt: its imports and helpers come first, and a bare function
    body (the classic completion format) continues the prompt's signature."""
    if not plan.prompt or plan.entry_point is None:
        return code
    if _defines(code, plan.entry_point):
        return plan.prompt + "\n" + code
    return plan.prompt + code


def _trim(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def _budget(plan: TestPlan, options: CodeOptions) -> list[float]:
    return [plan.timeout_s or options.test_timeout_s] * plan.count


class CodeVerifier(Verifier[CodeOptions]):
    name = "code"
    version = "1"
    description = (
        "Runs unit tests against the program in a completion (HumanEval check, MBPP asserts or stdin/stdout cases) "
        "in the sandbox; score = weighted fraction of tests passed, per-test outcomes in details.tests."
    )
    Options = CodeOptions
    execution = "async"
    binary = False
    default_timeout_s = 300.0  # a batch of hundreds queues for sandbox slots inside this deadline

    async def acheck(self, response: str, reference: Any, options: CodeOptions, ctx: Context) -> Verdict:
        # The sandbox's slots go round-robin by request: one request's hundreds of cases cannot starve another's.
        token = run_source.set(run_source.get() or ctx.source or None)
        try:
            return await self._check(response, reference, options, ctx)
        finally:
            run_source.reset(token)

    async def _check(self, response: str, reference: Any, options: CodeOptions, ctx: Context) -> Verdict:
        plan = build_plan(reference)
        extracted = extract_program(response, plan.language)
        if extracted is None:
            return Verdict.no_answer(f"no {plan.language} code found in the response", extracted=None)
        sandbox = ctx.resource(SANDBOX)
        available = sandbox.languages()
        language = _sandbox_name(sandbox, plan.language)
        if language is None:
            raise InvalidReference(
                f"language {plan.language!r} is not supported; known: {', '.join(sorted(available))}")
        if available.get(language) is False:
            raise VerifierUnavailable(f"language {plan.language!r} has no toolchain on this server")
        plan = replace(plan, language=language)
        if plan.kind == "appended":
            return await self._run_appended(sandbox, plan, extracted.code, extracted.source, options)
        if plan.kind == "stdio":
            outcome = await self._run_cases(sandbox, plan, extracted.code, options)
        else:
            outcome = await self._run_harness(sandbox, plan, assemble_program(plan, extracted.code), options)
        return _verdict(plan, outcome, extracted.source)

    async def _run_harness(self, sandbox: Any, plan: TestPlan, program: str,
                           options: CodeOptions) -> list[dict[str, str]]:
        timeouts = _budget(plan, options)
        walls = [wall_backstop(t) for t in timeouts]
        nonce = secrets.token_hex(16)
        job = {
            "nonce": nonce,
            "program": program,
            "tests": plan.judge_code,
            "setup": plan.setup,
            "tests_bytecode": plan.tests_bytecode.hex(),
            "setup_bytecode": plan.setup_bytecode.hex(),
            "bytecode_magic": BYTECODE_MAGIC,
            "subjects": plan.subjects,
            "timeouts": timeouts,
            "walls": walls,
            "stop_on_first_failure": options.stop_on_first_failure,
        }
        # the judge keeps each test's budgets; the run's own limits (within the sandbox's caps) only end a run whose
        # judge stopped keeping them
        request = RunRequest(
            code=harness_source(), language="python", stdin=json.dumps(job), args=plan.preload, precompiled=True,
            limits=Limits(wall_s=sum(walls) + STARTUP_S, cpu_s=sum(timeouts) + STARTUP_S,
                          memory_mb=options.memory_mb), network=options.network,
        )
        result: RunResult = await sandbox.run(request)
        if result.status == RunStatus.SANDBOX_ERROR:
            raise VerifierUnavailable(f"sandbox error: {result.reason or result.stderr[-300:]}")
        records = _nonce_records(result.stdout, nonce)
        if not any("hardened" in r for r in records):
            # The harness never reached the point where candidate code exists: our failure, never a score of 0.
            raise VerifierFailed(f"test harness failed to start ({result.status.value}): {_trim(result.stderr)}")
        tests: dict[int, dict[str, str]] = {}
        for record in records:
            index = record.get("i")
            if isinstance(index, int) and 0 <= index < plan.count and index not in tests:
                tests[index] = {"status": str(record.get("s")), "message": _trim(str(record.get("m") or ""))}
        done = any(r.get("done") for r in records)
        if (not done and result.status == RunStatus.RUNTIME_ERROR and result.signal is None
                and "Traceback" in result.stderr):
            raise VerifierFailed(f"test harness crashed: {_trim(result.stderr[-600:])}")
        missing = _missing_status(result)
        return [tests.get(i) or dict(missing) for i in range(plan.count)]

    async def _run_appended(self, sandbox: Any, plan: TestPlan, code: str, source: str,
                            options: CodeOptions) -> Verdict:
        """The program with its tests appended, run once: it passes when it exits 0; a runner that names its tests
        gives each its own result (and partial credit)."""
        timeout = plan.timeout_s or options.test_timeout_s
        program = assemble_appended(plan.language, plan.prompt, code, plan.judge_code)
        request = RunRequest(code=program, language=plan.language, network=options.network,
                             limits=Limits(wall_s=timeout, cpu_s=timeout, memory_mb=options.memory_mb))
        result: RunResult = await sandbox.run(request)
        if result.status == RunStatus.SANDBOX_ERROR:
            raise VerifierUnavailable(f"sandbox error: {result.reason or result.stderr[-300:]}")
        units = unit_results(plan.language, result)
        if units:
            names = [name for name, _, _ in units]
            outcomes = [{"status": "passed" if ok else "failed", "message": _trim(message)}
                        for _, ok, message in units]
        else:
            names = list(plan.names)
            outcomes = [{"status": "passed", "message": ""} if result.status == RunStatus.OK
                        else _case_outcome(result, "", plan)]
        return _verdict(replace(plan, names=names, weights=[1.0] * len(names)), outcomes, source)

    async def _run_cases(self, sandbox: Any, plan: TestPlan, program: str,
                         options: CodeOptions) -> list[dict[str, str]]:
        timeout = plan.timeout_s or options.test_timeout_s
        request = RunRequest(code=program, language=plan.language, network=options.network,
                             limits=Limits(wall_s=wall_backstop(timeout), cpu_s=timeout, memory_mb=options.memory_mb))
        inputs = [c.input for c in plan.cases]
        groups = [inputs[i:i + CASES_PER_BATCH] for i in range(0, len(inputs), CASES_PER_BATCH)]
        if options.stop_on_first_failure:
            results: list[RunResult] = []
            for group in groups:
                results += await _run_group(sandbox, request, group)
                first = next((i for i, (r, c) in enumerate(zip(results, plan.cases))
                              if _case_outcome(r, c.output, plan)["status"] != "passed"), None)
                if first is not None:
                    results = results[:first + 1]  # cases after the first failure count as skipped, run or not
                    break
        else:
            results = [r for part in await asyncio.gather(*(_run_group(sandbox, request, g) for g in groups))
                       for r in part]
        broken = next((r for r in results if r.status == RunStatus.SANDBOX_ERROR), None)
        if broken is not None:
            raise VerifierUnavailable(f"sandbox error: {broken.reason or broken.stderr[-300:]}")
        outcomes = [_case_outcome(r, c.output, plan) for r, c in zip(results, plan.cases)]
        skipped = {"status": "skipped", "message": "not run: stopped at the first failure"}
        return outcomes + [dict(skipped) for _ in range(plan.count - len(outcomes))]


def _sandbox_name(sandbox: Backend, language: str) -> str | None:
    """The sandbox's own name for a reference's language (``cs`` is ``csharp``, ``D_ut`` is ``d``), from the aliases
    the backend lists; None when it offers no such language."""
    available = sandbox.languages()
    for name in available:
        if language in (name, name.lower()):
            return name
    for name, info in sandbox.language_info().items():
        aliases = info.get("aliases")
        if isinstance(aliases, list) and language in (str(a).lower() for a in aliases):
            return name
    return None


async def _run_group(sandbox: Backend, request: RunRequest, stdins: list[str]) -> list[RunResult]:
    """Cases of one item through the backend's batch mode (one compile, one sandbox start per batch; a backend
    without one runs each case alone)."""
    return await sandbox.run_cases(request, stdins)


def _nonce_records(stdout: str, nonce: str) -> list[dict[str, object]]:
    records: list[dict[str, object]] = []
    prefix = nonce + " "
    for line in stdout.splitlines():
        if line.startswith(prefix):
            try:
                record = json.loads(line[len(prefix):])
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def _missing_status(result: RunResult) -> dict[str, str]:
    """What a test without a result line gets: never passed."""
    if result.status == RunStatus.TIMEOUT:
        return {"status": "timeout",
                "message": f"the run hit its time limit before this test finished ({result.reason})"}
    how = f"signal {result.signal}" if result.signal else f"status {result.status.value}"
    return {"status": "error", "message": f"the test harness was stopped ({how}) before this test finished"}


def _case_outcome(result: RunResult, expected: str, plan: TestPlan) -> dict[str, str]:
    status = result.status
    if status == RunStatus.OK:
        if outputs_match(result.stdout, expected, plan.compare, plan.tolerance):
            return {"status": "passed", "message": ""}
        return {"status": "failed", "message": _trim(describe_mismatch(result.stdout, expected))}
    if status == RunStatus.TIMEOUT:
        return {"status": "timeout", "message": _trim(f"time limit exceeded {result.reason}")}
    if status == RunStatus.COMPILE_ERROR:
        return {"status": "error", "message": _trim("compile error: " + (result.compile_output or result.stderr))}
    detail = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.reason
    return {"status": "error", "message": _trim(f"{status.value}: {detail}")}


def _verdict(plan: TestPlan, outcomes: list[dict[str, str]], extracted: str) -> Verdict:
    tests = [{"name": name, **outcome} for name, outcome in zip(plan.names, outcomes)]
    for test in tests:
        if test["status"] == "passed":
            test.pop("message", None)
    passed = [t["status"] == "passed" for t in tests]
    score = sum(w for w, ok in zip(plan.weights, passed) if ok) / sum(plan.weights)
    first = next((t for t in tests if t["status"] != "passed"), None)
    reason = (
        "all tests passed" if first is None
        else f"{sum(passed)}/{len(tests)} tests passed; first failure: {first['name']}: {first['message']}"
    )
    return Verdict.ok(
        score, _trim(reason), extracted=extracted, tests=tests, passed=sum(passed), total=len(tests),
        first_failure=None if first is None else {"index": tests.index(first), **first}, kind=plan.kind,
    )


VERIFIERS: list[Verifier[Any]] = [CodeVerifier()]
