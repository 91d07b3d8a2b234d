"""Which file names a run may carry (``files``) and read back (``collect``).

Checked before a run starts, so a name the work dir cannot hold (absolute, escaping, over-long, or clashing with
another: ``a`` and ``a/b``) is the request's error (422 at the HTTP edge), never the program's runtime_error.
"""
from __future__ import annotations

import posixpath

MAX_COMPONENT_BYTES = 255  # NAME_MAX of every Linux file system
MAX_PATH_BYTES = 1024
MAX_DEPTH = 32
MAX_FILES = 1000
MAX_COLLECT = 64  # files a run may read back; together they share the run's output budget
WORK_DIR = "/work"  # the program's work dir as every backend shows it (its cwd; a tmpfs of the run's own)


def path_problem(name: str) -> str:
    """Why ``name`` cannot be a work-dir path, in words; "" when it can."""
    if not name:
        return "a file name must not be empty"
    if "\0" in name:
        return f"file name {name!r} holds a NUL character"
    if name.startswith("/"):
        return f"file name {name!r} must be a relative path inside the work dir"
    norm = posixpath.normpath(name)
    if norm == "." or norm == ".." or norm.startswith("../"):
        return f"file name {name!r} must be a relative path inside the work dir"
    if name.endswith("/") or posixpath.basename(name) in (".", ".."):
        return f"file name {name!r} names a directory, not a file"
    try:
        encoded = norm.encode("utf-8")
    except UnicodeEncodeError:
        return f"file name {name!r} is not valid Unicode"
    if len(encoded) > MAX_PATH_BYTES:
        return f"file name {name[:40]!r}... is {len(encoded)} bytes long, over the limit of {MAX_PATH_BYTES}"
    parts = norm.split("/")
    if len(parts) > MAX_DEPTH:
        return f"file name {name[:40]!r}... is nested {len(parts)} directories deep, over the limit of {MAX_DEPTH}"
    for part in parts:
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            return f"file name {name[:40]!r}... has a component over {MAX_COMPONENT_BYTES} bytes"
    return ""


def _names_problem(names: list[str], seen: dict[str, str], what: str) -> str:
    """The first bad name, or the first two names of one file; fills ``seen`` (normalised name -> name)."""
    for name in names:
        problem = path_problem(name)
        if problem:
            return problem
        norm = posixpath.normpath(name)
        if norm in seen:
            return f"{what} {seen[norm]!r} and {name!r} name the same file"
        seen[norm] = name
    return ""


def files_problem(names: list[str], program: str = "") -> str:
    """The first problem of a set of files to write: a bad name, two names for one file, a file that another one
    needs as its directory, or one that would overwrite the program's own source file (``program``)."""
    if len(names) > MAX_FILES:
        return f"{len(names)} files, over the limit of {MAX_FILES}"
    seen: dict[str, str] = {}
    if program:
        for name in names:
            if posixpath.normpath(name) == program:
                return f"file {name!r} would overwrite the program's own source file"
        names = [*names, program]
    problem = _names_problem(names, seen, "file names")
    if problem:
        return problem
    for norm, name in seen.items():
        parent = posixpath.dirname(norm)
        while parent:
            if parent in seen:
                return f"file {seen[parent]!r} is also the directory of {name!r}"
            parent = posixpath.dirname(parent)
    return ""


def collect_problem(names: list[str]) -> str:
    """The first problem of a list of files to read back: too many, a bad name, or one file named twice."""
    if len(names) > MAX_COLLECT:
        return f"{len(names)} files to collect, over the limit of {MAX_COLLECT}"
    return _names_problem(names, {}, "collect names")
