"""The default backend: bubblewrap namespaces, rlimits, seccomp and a memory cgroup, with a warm pool of sandboxes.

``backend`` holds the backend and builds each run; ``layout`` what a sandbox sees of the host and bwrap's command
line; ``pool`` the started sandboxes and their reuse; ``job`` running one job and naming its result; ``frames`` the
wire with the supervisor (sandbox/inside/supervisor.py); ``config`` the settings. How a run's outcome is named is
``sandbox.outcome``, shared with the docker backend.
"""
from sandbox.bwrap.backend import BwrapBackend
from sandbox.bwrap.config import BwrapConfig
from sandbox.bwrap.pool import SandboxStartError

__all__ = ["BwrapBackend", "BwrapConfig", "SandboxStartError"]
