"""Where a reference's database name leads: a file under the configured databases directory, never outside it.

Layouts: ``NAME/NAME.sqlite`` (Spider, BIRD) and ``NAME.sqlite``. A name is one path component; a name with a
separator, ``..``, an absolute path, or a link that resolves outside the directory is refused.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from verifiers.context import process_setting
from verifiers.types import InvalidReference, VerifierUnavailable

ENV_VAR = "REWARD_SERVICE_SQL_DATABASES_DIR"
MAX_NAME_CHARS = 200


def databases_dir() -> Path:
    """This process's ``sql_databases_dir`` (a worker's configuration, else the environment variable)."""
    configured = process_setting("sql_databases_dir") or os.environ.get(ENV_VAR, "")
    if not configured:
        raise VerifierUnavailable(f"no SQL databases directory is configured (sql_databases_dir / {ENV_VAR})")
    root = Path(configured)
    if not root.is_dir():
        raise VerifierUnavailable(f"the SQL databases directory {configured!r} does not exist")
    return root


def resolve_database(root: Path, name: object) -> Path:
    if not isinstance(name, str) or not name.strip():
        raise InvalidReference("the reference's 'database' must be a non-empty name")
    if (len(name) > MAX_NAME_CHARS or name in {".", ".."} or "\0" in name
            or any(sep in name for sep in ("/", "\\", os.sep)) or os.path.isabs(name)):
        raise InvalidReference(f"database name {name[:80]!r} is not a plain name inside the databases directory")
    return _resolve(str(root), name)


@lru_cache(maxsize=1024)
def _resolve(directory: str, name: str) -> Path:
    """Held once found (a worker meets the same few databases again and again); a miss is looked up each time."""
    root = Path(directory)
    base = root.resolve()
    for candidate in (root / name / f"{name}.sqlite", root / f"{name}.sqlite"):
        if not os.path.lexists(candidate):
            continue
        real = candidate.resolve()
        if not real.is_relative_to(base):
            raise InvalidReference(f"database {name!r} leads outside the databases directory")
        if real.is_file():
            return real
    raise InvalidReference(f"no database {name!r} in the databases directory")
