"""Environments for agent rollouts: stateful tool sessions (a persistent Python interpreter, a read-only SQL
database, ...) that a policy acts in during its rollout, over OpenEnv's protocol and MCP (docs/environments.md).

Uses ``sandbox`` (sessions' interpreters) and ``verifiers`` (rewards, guards); neither imports it; the service mounts
its wire (``environments.wire``) at ``/envs/{name}``."""
