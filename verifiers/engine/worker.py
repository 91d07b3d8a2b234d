"""Worker process for ``process``-mode verifiers: reads framed requests on stdin, writes verdicts on a private fd.

Run as ``python -m verifiers.engine.worker [--config JSON] MODULE...`` (``WorkerConfig``: the pool configures its
workers explicitly, not through environment variables). Verifier code that prints cannot corrupt the protocol: fd 1 is
pointed at stderr before any verifier is imported, and verdicts go out on a duplicate of the original stdout.
"""
from __future__ import annotations

import os
import resource
import signal
import sys
from typing import Any

from verifiers.context import configure_process
from verifiers.engine.frames import read_frame, write_frame


def _limit_memory(mb: int) -> None:
    if mb > 0:
        limit = mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _die_with_parent() -> None:
    """A worker stuck in a check never sees its stdin close: have the kernel kill it when the pool's process dies
    (a crashed server or an interrupted script must not leave checks burning the CPU). Linux only."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> None:
    from verifiers.engine.worker_config import parse_args

    config, modules = parse_args(argv)
    _die_with_parent()
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    proto_in = sys.stdin.buffer

    from verifiers.engine.failures import failure_verdict
    from verifiers.engine.registry import load_modules
    from verifiers.types import Verdict, VerifyItem

    configure_process(config.kind_settings())
    registry = load_modules(modules)
    for verifier in registry:
        if verifier.execution == "process":
            verifier.warm_up()
    _limit_memory(config.memory_mb)
    write_frame(proto_out, ("ready", registry.names()))

    def check_one(name: str, response: str, reference: object, options: dict[str, Any],
                  messages: list[dict[str, Any]] | None = None, tools: list[dict[str, Any]] | None = None,
                  ) -> dict[str, Any]:
        try:
            verifier = registry.get(name)
            item = VerifyItem(name, response, reference, messages=messages, tools=tools)
            verdict: Verdict = verifier.check_item(item, verifier.parse_options(options))
        except Exception as exc:  # a verifier bug must become a named verdict, not a dead worker
            verdict = failure_verdict(exc, name)
        return verdict.to_dict()

    # Each request is a chunk of jobs; one result frame goes out as soon as each job is done, so the pool can time
    # every job separately and kill the worker on the one that overruns.
    while True:
        chunk = read_frame(proto_in)
        if chunk is None:
            return
        for job in chunk:
            write_frame(proto_out, check_one(*job))


if __name__ == "__main__":
    main(sys.argv[1:])
