"""The Kimina Lean server's wire format (project-numina/kimina-lean-server, server 2.x: ``POST /api/check``).

Request::

    {"snippets": [{"id": "s1", "code": "import Mathlib\\ntheorem ..."}], "timeout": 60, "debug": false,
     "reuse": true}

Response: ``{"results": [...]}``, one entry per snippet, matched by ``id``::

    {"id": "s1", "time": 1.2, "response": {"env": 0, "messages": [{"severity": "error",
      "pos": {"line": 3, "column": 2}, "endPos": {"line": 3, "column": 8}, "data": "..."}],
      "sorries": [{"pos": ..., "endPos": ..., "goal": "..."}]}}
    {"id": "s2", "time": 60.0, "error": "Lean REPL command timed out in 60 seconds"}
    {"id": "s3", "time": 0.1, "response": {"message": "Lean REPL error ..."}}

``messages``/``sorries`` are the Lean REPL's (leanprover-community/repl); ``error`` is the server's own failure
(a timeout says "timed out"); a ``response`` with ``message`` is the REPL's. The older ``/checks`` route answered a
bare list of the same entries, which is read too.

Server 1.x (``server/server.py``) speaks ``POST /verify`` instead: ``{"codes": [{"custom_id", "proof"}], "timeout",
"disable_cache"}`` answered by ``{"results": [{"custom_id", "error", "response"}]}``, ``response`` being the REPL's
JSON with its ``time`` (a timeout is the error "Lean process timed out"). ``API = "verify"`` selects it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["check", "verify"]
PATHS: dict[str, str] = {"check": "/api/check", "verify": "/verify"}

SEVERITIES = frozenset({"trace", "info", "warning", "error"})


class LeanServerError(Exception):
    """The Lean server answered, but not with a usable check (malformed reply, its own failure, a refused call)."""


@dataclass(frozen=True)
class Message:
    severity: str
    line: int
    column: int
    data: str

    def where(self) -> str:
        return f"{self.line}:{self.column}"


@dataclass(frozen=True)
class SnippetResult:
    id: str
    time: float = 0.0
    error: str | None = None  # the server's failure for this snippet
    repl_error: str | None = None  # the REPL's own failure (``response.message``)
    messages: list[Message] = field(default_factory=list)
    sorries: int = 0

    @property
    def timed_out(self) -> bool:
        return self.error is not None and "timed out" in self.error.lower()


def request_body(snippets: list[tuple[str, str]], timeout_s: int, api: Api = "check") -> dict[str, Any]:
    if api == "verify":
        return {"codes": [{"custom_id": sid, "proof": code} for sid, code in snippets], "timeout": timeout_s,
                "disable_cache": False}
    return {"snippets": [{"id": sid, "code": code} for sid, code in snippets], "timeout": timeout_s,
            "debug": False, "reuse": True}


def _fail(what: str, entry: object) -> LeanServerError:
    return LeanServerError(f"malformed Lean server answer: {what}: {str(entry)[:200]!r}")


def _message(raw: object) -> Message:
    if not isinstance(raw, dict):
        raise _fail("a message is not an object", raw)
    severity, pos, data = raw.get("severity"), raw.get("pos") or {"line": 0, "column": 0}, raw.get("data")
    if severity not in SEVERITIES or not isinstance(data, str) or not isinstance(pos, dict):
        raise _fail("a message lacks severity or data", raw)
    line, column = pos.get("line"), pos.get("column")
    if not isinstance(line, int) or not isinstance(column, int):
        raise _fail("a message position is not line/column integers", raw)
    return Message(str(severity), line, column, data)


def _result(raw: object) -> SnippetResult:
    if not isinstance(raw, dict):
        raise _fail("a result is not an object", raw)
    sid = raw.get("id", raw.get("custom_id"))
    if not isinstance(sid, (str, int)) or isinstance(sid, bool):
        raise _fail("a result has no id", raw)
    error, response = raw.get("error"), raw.get("response")
    time = raw.get("time", response.get("time", 0.0) if isinstance(response, dict) else 0.0)
    if not isinstance(time, (int, float)):
        raise _fail("a result's time is not a number", raw)
    if error is not None:
        if not isinstance(error, str):
            raise _fail("a result's error is not a string", raw)
        return SnippetResult(str(sid), float(time), error=error)
    if not isinstance(response, dict):
        raise _fail("a result has neither error nor response", raw)
    if "message" in response and "messages" not in response:
        return SnippetResult(str(sid), float(time), repl_error=str(response["message"]))
    messages, sorries = response.get("messages") or [], response.get("sorries") or []
    if not isinstance(messages, list) or not isinstance(sorries, list):
        raise _fail("messages or sorries is not a list", raw)
    return SnippetResult(str(sid), float(time), messages=[_message(m) for m in messages], sorries=len(sorries))


def parse_results(body: object, ids: list[str]) -> dict[str, SnippetResult]:
    """The results for ``ids``; every id must be answered exactly once."""
    entries = body.get("results") if isinstance(body, dict) else body
    if not isinstance(entries, list):
        raise _fail("no results list", body)
    results: dict[str, SnippetResult] = {}
    for raw in entries:
        result = _result(raw)
        if result.id in results:
            raise _fail("a snippet id is answered twice", result.id)
        results[result.id] = result
    missing = [i for i in ids if i not in results]
    if missing:
        raise LeanServerError(f"malformed Lean server answer: {len(missing)} of {len(ids)} snippets unanswered")
    return results
