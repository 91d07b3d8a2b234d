"""Which host processes are alive: by pid, or by a marker on their command line (a sandboxed program is in a pid
namespace of its own, so the host sees it under another pid; a marker it carries in its argv finds it)."""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path


def alive(pid: int) -> bool:
    """Running (a zombie is a dead process its parent has not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def with_marker(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``, this test process excluded."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and alive(int(entry)):
            found.append(int(entry))
    return found


def pids_in(directory: Path) -> list[int]:
    """The pids that ``test_pid_sleep`` checks left in ``directory``."""
    return [int(p.read_text()) for p in sorted(directory.glob("*.pid")) if p.read_text().strip()]


def wait_until(condition: Callable[[], bool], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {within_s:g}s: {what}"
        time.sleep(0.05)


def all_gone(pids: Iterable[int]) -> bool:
    return not any(alive(p) for p in pids)
