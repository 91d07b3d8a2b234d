"""How a run's end is named (sandbox.outcome.classify): the cases a real run produces, each with the status a
trainer must see."""
from __future__ import annotations

import signal

from sandbox.api import Limits, RunStatus
from sandbox.outcome import Observed, classify

LIMITS = Limits(wall_s=6, cpu_s=2, memory_mb=256)


def observed(**kw: object) -> Observed:
    base: dict[str, object] = {"exit_code": None, "signal": None, "cpu_ms": 10.0, "max_rss_kb": 1000, "stderr": ""}
    return Observed(**{**base, **kw})  # type: ignore[arg-type]


def test_a_wrapped_process_killed_by_its_cpu_limit_is_a_timeout() -> None:
    """vvp under its shell wrapper met RLIMIT_CPU: the shell exits 152 (128 + SIGXCPU) with the budget spent."""
    status, reason = classify(observed(exit_code=128 + signal.SIGXCPU, cpu_ms=2004.0,
                                       stderr="line 4: 7 CPU time limit exceeded vvp -n main"), LIMITS)
    assert status == RunStatus.TIMEOUT and "CPU-time limit of 2s" in reason and "152" in reason


def test_an_error_exit_well_inside_the_budget_stays_a_runtime_error() -> None:
    status, reason = classify(observed(exit_code=1, cpu_ms=300.0), LIMITS)
    assert (status, reason) == (RunStatus.RUNTIME_ERROR, "exited with code 1")


def test_a_clean_exit_that_spent_the_budget_is_still_ok() -> None:
    assert classify(observed(exit_code=0, cpu_ms=1990.0), LIMITS)[0] == RunStatus.OK


def test_the_process_own_cpu_signal_is_a_timeout() -> None:
    assert classify(observed(signal=signal.SIGXCPU, cpu_ms=2001.0), LIMITS)[0] == RunStatus.TIMEOUT
