"""A busy machine on demand: processes that spin on every CPU, for tests whose verdict must not depend on load."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

# Runnable spinners per CPU: a CPU-bound program beside them gets about 1/(PER_CPU + 1) of a CPU, and less where
# others load the machine too.
PER_CPU = 6


@contextlib.contextmanager
def cpu_hog(per_cpu: int = PER_CPU) -> Iterator[int]:
    """``per_cpu`` spinning processes per CPU for the ``with`` block (their count is yielded), killed after it."""
    count = per_cpu * len(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-S", "-c", "while True:\n    pass\n"]) for _ in range(count)]
    try:
        yield count
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
