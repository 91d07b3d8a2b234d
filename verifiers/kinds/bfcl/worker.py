"""The process a live ``bfcl`` session's instances live in: ``python -m verifiers.kinds.bfcl.worker [memory_mb]``.

BFCL's classes are ordinary Python and some calls cost without bound (``power`` with a huge exponent, ``logarithm``
at a huge precision); a session's instances therefore never run in the server. This program holds one episode and
answers one JSON line per request on stdin with one JSON line on stdout: ``reset`` (the task), ``step`` (an action,
read here with the ``tool_calls`` parser), ``record`` (a step that ran past its time limit: its error results, no
effect), ``end_turn``. Its address space is capped; the server kills it at a step's deadline and rebuilds the episode
in a new one by replaying the requests that came before (the simulated APIs are deterministic).
"""
from __future__ import annotations

import json
import resource
import sys
from typing import Any

from verifiers.kinds.bfcl.actions import read_action
from verifiers.kinds.bfcl.episode import Episode
from verifiers.kinds.bfcl.source import task_from_dict
from verifiers.types import VerifierError


def handle(episode: Episode | None, request: dict[str, Any]) -> tuple[Episode | None, dict[str, Any]]:
    op = request.get("op")
    if op == "reset":
        episode = Episode(task_from_dict(request["task"]), irrelevance=bool(request.get("irrelevance")))
        return episode, {"turns": episode.n_turns}
    if episode is None:
        return episode, {"error": "no episode: reset first"}
    if op == "step":
        step = read_action(request.get("tool_calls"), request.get("content"), int(request.get("max_chars", 200_000)))
        results = episode.step(step.calls) if step.runs else []
        return episode, {"format": step.format, "error": step.error, "runs": step.runs,
                         "calls": [c.name[:200] for c in step.calls], "results": results,
                         "steps": episode.steps, "step_limit_reached": episode.step_limit_reached}
    if op == "record":
        episode.record([str(r) for r in request.get("results", [])])
        return episode, {"steps": episode.steps, "step_limit_reached": episode.step_limit_reached}
    if op == "end_turn":
        verdict = episode.end_turn()
        if episode.done:
            episode.finish()
        return episode, {"turn": verdict.as_dict(), "done": episode.done, "passed": episode.passed,
                         "error_type": episode.error_type, "turn_scores": [float(t.passed) for t in episode.turns],
                         "turns": [t.as_dict() for t in episode.turns] if episode.done else None}
    return episode, {"error": f"unknown op {str(op)[:40]!r}"}


def main(argv: list[str]) -> None:
    if argv and int(argv[0]) > 0:
        limit = int(argv[0]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    episode: Episode | None = None
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            episode, answer = handle(episode, json.loads(line))
        except VerifierError as exc:  # a task bfcl-eval cannot load (InvalidReference, VerifierUnavailable)
            answer = {"error": str(exc), "status": exc.status.value}
        out.write(json.dumps(answer, default=str) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
