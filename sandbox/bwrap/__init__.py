"""The default backend: bubblewrap namespaces, rlimits, seccomp and a memory cgroup, with a warm pool of sandboxes."""
from sandbox.bwrap.backend import BwrapBackend, BwrapConfig, SandboxStartError

__all__ = ["BwrapBackend", "BwrapConfig", "SandboxStartError"]
