"""What the deployment tests share: the compose command line, where there is one."""
from __future__ import annotations

import shutil
import subprocess


def compose_cli() -> list[str] | None:
    """The compose command line here (``docker compose`` or ``docker-compose``), or None; no engine is needed to
    validate and render a compose file."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None
