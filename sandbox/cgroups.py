"""A memory cgroup per sandbox, so a run's limit counts what rlimits cannot see: memfd and shared-memory pages,
files in its tmpfs mounts, page tables, kernel memory.

Two hierarchies are supported. cgroup v1's memory controller (``memory.limit_in_bytes``; usable by root, which is how
this project's machines run) and cgroup v2 where the server's own cgroup may create children with the memory
controller (a systemd unit with ``Delegate=yes``, or a container given its own cgroup namespace). The per-sandbox
groups live under the server's own cgroup, so they also stay inside whatever limit the operator gave the server.
Where neither works the backend falls back to capped tmpfs mounts and refuses memfd (see ``sandbox.seccomp``).
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


def _own_path(controller_line: str) -> str:
    return controller_line.split(":", 2)[2].strip() or "/"


def _read_own_cgroups() -> dict[str, str]:
    """controller → path of this process's cgroup (``""`` is the v2 unified entry)."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                for ctrl in parts[1].split(",") if parts[1] else [""]:
                    out[ctrl] = _own_path(line)
    return out


def _sweep_dead_servers(parent: Path) -> None:
    """Groups a crashed server left behind: kill what is still in them and remove them."""
    with contextlib.suppress(OSError):
        for base in parent.glob("reward-sandbox-*"):
            pid = base.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                version = 1 if (base / "memory.limit_in_bytes").exists() else 2
                for child in [c for c in base.iterdir() if c.is_dir()]:
                    group = MemoryGroup(child, version)
                    group.kill_all()
                    group.remove()
                with contextlib.suppress(OSError):
                    base.rmdir()


@dataclass
class MemoryGroup:
    """One sandbox's cgroup: set its limit before a job, read whether the OOM killer acted after it."""

    path: Path
    version: int
    limit: int = 0  # the limit this object last set (0: none yet); only the host writes the group's limit

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def set_limit(self, limit_bytes: int) -> None:
        """Set the group's memory limit (and swap limit), unless it is the one set last: the runs of a reused sandbox
        mostly ask for the same, and each write is a few file operations on the host's event loop."""
        if limit_bytes == self.limit:
            return
        self.limit = 0  # unknown until every write below went through
        if self.version == 1:
            swap = self.path / "memory.memsw.limit_in_bytes"
            current = int((self.path / "memory.limit_in_bytes").read_text())
            if swap.exists() and limit_bytes > current:
                swap.write_text(str(limit_bytes))  # memsw must stay >= the memory limit: raise it first
                (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            else:
                (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                if swap.exists():
                    swap.write_text(str(limit_bytes))  # no swapping past the limit either
        else:
            (self.path / "memory.max").write_text(str(limit_bytes))
            with contextlib.suppress(OSError):
                (self.path / "memory.swap.max").write_text("0")
        self.limit = limit_bytes

    def held_bytes(self) -> int:
        """Anonymous and shared memory (memfd, tmpfs, SysV segments) and socket buffers charged to the group, page
        cache left out: what a finished run could leave pinned for the next run of a reused sandbox."""
        keys = ("rss", "shmem") if self.version == 1 else ("anon", "shmem", "sock")
        held = 0
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / "memory.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key in keys:
                    held += int(value)
        return held

    def oom_kills(self) -> int:
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def kill_all(self) -> None:
        """SIGKILL whatever is still in the group (the backstop behind bwrap's own teardown)."""
        with contextlib.suppress(OSError):
            for pid in self.procs.read_text().split():
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), 9)

    def remove(self, attempts: int = 20) -> bool:
        """rmdir, retrying while the killed sandbox's last processes finish exiting."""
        for _ in range(attempts):
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.005)
        return False


class MemoryCgroups:
    """Creates one ``MemoryGroup`` per sandbox under ``<server's cgroup>/reward-sandbox-<pid>``."""

    def __init__(self, base: Path, version: int) -> None:
        self.base = base
        self.version = version
        self._ids = itertools.count()
        self._stale: list[MemoryGroup] = []

    @property
    def mechanism(self) -> str:
        return f"cgroup v{self.version} memory controller ({self.base})"

    @classmethod
    def detect(cls, root_override: str | None = None) -> tuple[MemoryCgroups | None, str]:
        """(cgroups, "") when a writable memory hierarchy exists, else (None, why not)."""
        own = _read_own_cgroups()
        candidates: list[tuple[Path, int]] = []
        if root_override:
            p = Path(root_override)
            candidates.append((p, 1 if (p / "memory.limit_in_bytes").exists() else 2))
        if "memory" in own and V1_ROOT.is_dir():
            candidates.append((V1_ROOT / own["memory"].lstrip("/"), 1))
        if "" in own and (V2_ROOT / "cgroup.controllers").exists():
            candidates.append((V2_ROOT / own[""].lstrip("/"), 2))
        reasons = []
        for parent, _ in candidates:
            _sweep_dead_servers(parent)
        for parent, version in candidates:
            # one base per backend (a process may hold several: tests, benchmarks), the server's pid last (see
            # _sweep_dead_servers)
            base = parent / f"reward-sandbox-{os.urandom(4).hex()}-{os.getpid()}"
            try:
                if version == 2 and "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                    (parent / "cgroup.subtree_control").write_text("+memory")
                base.mkdir(exist_ok=True)
                if version == 2:
                    (base / "cgroup.subtree_control").write_text("+memory")
                probe = cls(base, version)
                group = probe.create()
                group.set_limit(64 << 20)
                group.remove()
                return probe, ""
            except OSError as exc:
                reasons.append(f"{parent} (v{version}): {exc.strerror or exc}")
                with contextlib.suppress(OSError):
                    base.rmdir()
        return None, "; ".join(reasons) or "no memory cgroup hierarchy is mounted"

    def create(self) -> MemoryGroup:
        self.sweep()
        path = self.base / f"box-{next(self._ids)}"
        path.mkdir()
        if self.version == 1:
            with contextlib.suppress(OSError):
                (path / "memory.swappiness").write_text("0")
        return MemoryGroup(path, self.version)

    def release(self, group: MemoryGroup) -> None:
        group.kill_all()
        if not group.remove(attempts=3):
            self._stale.append(group)

    def sweep(self) -> None:
        self._stale = [g for g in self._stale if not g.remove(attempts=1)]

    def close(self) -> None:
        for group in self._stale:
            group.kill_all()
            group.remove()
        with contextlib.suppress(OSError):
            for child in self.base.iterdir():
                if child.is_dir():
                    leftover = MemoryGroup(child, self.version)
                    leftover.kill_all()
                    leftover.remove()
            self.base.rmdir()
