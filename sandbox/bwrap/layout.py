"""What a sandbox sees of the host: read-only system paths, the interpreter and each toolchain bound at neutral
paths, /etc files of its own, and bwrap's command line up to the supervisor's arguments."""
from __future__ import annotations

import contextlib
import glob
import logging
import os
import py_compile
import site
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sandbox.inside import SUPERVISOR
from sandbox.language_spec import SUPPORT_IN_SANDBOX
from sandbox.languages import SUPPORT_DIR, ResolvedLanguage

log = logging.getLogger("sandbox.bwrap")

SUPERVISOR_IN_SANDBOX = "/.sandbox/supervisor.py"
WORK_IN_SANDBOX = "/work"  # the program's work dir, where the supervisor writes its files
HOST_MOUNTS = "/.sandbox/host"  # where non-system directories (the interpreter's prefix, toolchains) are bound
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
# Read-only system paths every sandbox sees (missing ones are skipped). Deliberately not all of /etc.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache", "/etc/ld.so.conf",
                "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime")
# Runtimes' own configuration outside /usr (Mono's machine.config, PHP's php.ini, R's Renviron, Racket's config.rktd,
# LDC's ldc2.conf, GHC's package database).
SYSTEM_GLOBS = ("/etc/java-*", "/etc/ssl/certs", "/etc/mono", "/etc/php", "/etc/R", "/etc/racket", "/etc/perl",
                "/etc/ldc2.conf", "/var/lib/ghc")
SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/etc/")


def _compiled_supervisor(directory: str) -> tuple[str, str]:
    """(host path, sandbox path) of the supervisor to run: its bytecode, compiled once per backend, so no sandbox
    start compiles it again (Python never caches the bytecode of a main script; ~3.5 ms of CPU per start here). The
    sandbox runs the host's own interpreter, so the bytecode's magic matches; the source is the fallback."""
    target = os.path.join(directory, "supervisor.pyc")
    try:
        py_compile.compile(str(SUPERVISOR), cfile=target, dfile=SUPERVISOR_IN_SANDBOX, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    except (py_compile.PyCompileError, OSError) as exc:
        log.warning("running the sandbox supervisor from source: cannot compile it (%s)", exc)
        return str(SUPERVISOR), SUPERVISOR_IN_SANDBOX
    os.chmod(target, 0o644)
    return target, SUPERVISOR_IN_SANDBOX + "c"


def _is_system(path: str) -> bool:
    return any((path + "/").startswith(p) for p in SYSTEM_PREFIXES)


class PathMap:
    """Host directories as the sandbox sees them: system ones at their own path, the rest under /.sandbox/host/N.

    Binding the interpreter's prefix at a neutral path keeps the host's layout (home directories, venv locations)
    out of the sandbox, and works where the host path is one the sandbox covers with its own mounts (a venv under
    /tmp, where pip, CI and many users put it)."""

    def __init__(self) -> None:
        self.binds: list[tuple[str, str]] = []  # (host, inside), in bind order
        self._neutral = 0

    def add(self, host: str) -> str:
        host = os.path.realpath(host)
        for src, dst in self.binds:
            if host == src or host.startswith(src + "/"):
                return dst + host[len(src):]
        if _is_system(host):
            inside = host
        else:
            inside = f"{HOST_MOUNTS}/{self._neutral}"
            self._neutral += 1
        self.binds.append((host, inside))
        return inside

    def inside(self, host: str) -> str:
        real = os.path.realpath(host)
        for src, dst in self.binds:
            if real == src or real.startswith(src + "/"):
                return dst + real[len(src):]
        return host


def _mount_args(paths: list[str], mapped: PathMap, files: list[tuple[str, str]]) -> list[str]:
    """--ro-bind each path (symlinks as symlinks), creating world-readable parents for deep ones."""
    args: list[str] = []
    made: set[str] = {"/"}
    bound: list[str] = []
    targets = [(p, p) for p in paths] + list(mapped.binds) + files
    for src, dest in targets:
        if not os.path.lexists(src) or any(dest == b or dest.startswith(b + "/") for b in bound):
            continue
        parent = os.path.dirname(dest)
        chain = []
        while parent not in made and not any(parent == b or parent.startswith(b + "/") for b in bound):
            chain.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(chain):
            args += ["--perms", "0755", "--dir", d]
            made.add(d)
        if src == dest and os.path.islink(src) and os.path.dirname(src) == "/":
            args += ["--symlink", os.readlink(src), src]
        else:
            args += ["--ro-bind", src, dest]
            bound.append(dest)
    return args


@dataclass
class PythonPaths:
    executable: str  # the base interpreter, as the sandbox sees it
    site_packages: list[str]  # as the sandbox sees them
    library_path: str  # LD_LIBRARY_PATH for a shared libpython bound away from its build path ("" if not needed)


def _python_paths(mapped: PathMap) -> PythonPaths:
    """The base interpreter (never a venv's shim: its pyvenv.cfg points at host paths) and the site-packages a
    program may import from (numpy, ...), bound through ``mapped``."""
    base_exe = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    root = prefix if base_exe.startswith(prefix + "/") else str(Path(base_exe).parent.parent)
    mapped.add(root)
    packages = [mapped.add(p) for p in site.getsitepackages() if os.path.isdir(p)]
    library_path = ""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir and mapped.inside(libdir) != os.path.realpath(libdir):
        library_path = mapped.add(libdir)
    return PythonPaths(mapped.inside(base_exe), packages, library_path)


def _etc_files(uids: list[int]) -> dict[str, str]:
    """A passwd and group of the sandbox's own: the host's users stay out of sight."""
    users = ["root:x:0:0:root:/root:/usr/sbin/nologin",
             *(f"sandbox:x:{u}:{u}:sandbox:/tmp:/usr/sbin/nologin" for u in uids),
             "nobody:x:65534:65534:nobody:/:/usr/sbin/nologin"]
    groups = ["root:x:0:", *(f"sandbox:x:{u}:" for u in uids), "nogroup:x:65534:"]
    return {"passwd": "\n".join(users) + "\n", "group": "\n".join(groups) + "\n",
            "hostname": "sandbox\n", "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
            "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n"}


class Layout:
    """The sandboxes' view of the host, built once per backend: ``argv_head`` is bwrap's command line up to the
    supervisor's own arguments (the result fd, then the uid and gid to drop to); ``etc`` is removed by ``close``."""

    def __init__(self, bwrap: str, langs: dict[str, ResolvedLanguage], uids: list[int], privileged: bool) -> None:
        mapped = PathMap()
        self.python = _python_paths(mapped)
        self.tools: dict[str, dict[str, str]] = {}
        for name, lang in langs.items():
            if lang.available:
                for b in lang.binds:
                    mapped.add(b)
                self.tools[name] = {tool: mapped.inside(path) for tool, path in lang.tools.items()}
        self.env = {**BASE_ENV, **({"LD_LIBRARY_PATH": self.python.library_path} if self.python.library_path
                                   else {})}
        extra = [p for g in SYSTEM_GLOBS for p in sorted(glob.glob(g))]
        self.etc = tempfile.mkdtemp(prefix="reward-sandbox-etc-")
        for name, text in _etc_files(uids or [os.getuid()]).items():
            Path(self.etc, name).write_text(text)
            os.chmod(Path(self.etc, name), 0o644)
        etc_binds = [(str(Path(self.etc, name)), f"/etc/{name}") for name in sorted(os.listdir(self.etc))]
        supervisor, supervisor_inside = _compiled_supervisor(self.etc)
        self.argv_head = [
            bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            *([] if privileged else ["--unshare-user"]),
            "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv", "--hostname", "sandbox",
            # CAP_SYS_ADMIN only for the supervisor's first steps, as root in bwrap's mount namespace: it unmounts
            # what bwrap binds over parts of /proc (supervisor._uncover_proc), then drops every capability with its uid
            *(["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SYS_ADMIN"]
              if privileged else []),
            *_mount_args([*SYSTEM_PATHS, *extra], mapped, etc_binds),
            "--perms", "0755", "--dir", "/.sandbox", "--ro-bind", supervisor, supervisor_inside,
            "--ro-bind", str(SUPPORT_DIR), SUPPORT_IN_SANDBOX,
            "--proc", "/proc", "--dev", "/dev",
            # mount points only: the supervisor mounts the run's own tmpfs on them when the job (and its disk_mb) is in
            "--perms", "0755", "--dir", "/.rw", "--perms", "0755", "--dir", "/work", "--perms", "1777", "--dir", "/tmp",
            "--chdir", "/work",
            "--setenv", "PATH", BASE_ENV["PATH"],
            *(["--setenv", "LD_LIBRARY_PATH", self.python.library_path] if self.python.library_path else []),
            self.python.executable, "-S", "-I", supervisor_inside,
        ]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            for name in os.listdir(self.etc):
                os.unlink(os.path.join(self.etc, name))
            os.rmdir(self.etc)
