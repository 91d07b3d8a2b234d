"""A test double of the Kimina Lean server (project-numina/kimina-lean-server 2.x): a real FastAPI app under uvicorn
on loopback, speaking its wire protocol.

Protocol, as the real server: ``POST /api/check`` with ``{"snippets": [{"id", "code"}], "timeout", "debug",
"reuse", "infotree"}`` (422 when snippets are missing or empty, ids repeat, or timeout is not a non-negative
integer); the key, when configured, in ``X-Auth-Token`` or ``Authorization`` (a ``Bearer`` prefix stripped; 401
otherwise); the answer ``{"results": [{"id", "time", "response": {"env", "messages", "sorries"}} | {"id", "time",
"error"}]}``. Like the real server, leading ``import`` lines are the header and message positions count lines of
the rest (the body).

No Lean runs here: the double "elaborates" by fixed rules on the snippet text, with comments (``--``, nested
``/- -/``) and string literals blanked first:

- ``slow_tactic`` anywhere: the server's time limit, ``error: "Lean REPL command timed out in {timeout} seconds"``.
- ``repl_panic``: the REPL's own failure, ``response: {"message": "..."}``.
- ``false_step``: an error message at its position ("linarith failed to find a contradiction").
- an import other than Mathlib/Aesop: an error at 1:0 ("unknown module prefix").
- ``sorry`` or ``lib_admit`` (a library tactic that closes goals with sorry): one ``sorries`` entry each and the
  warning "declaration uses 'sorry'".
- ``#print axioms NAME``: "unknown constant" error unless ``theorem/lemma NAME`` is in the code; otherwise the info
  "'NAME' depends on axioms: [...]": propext, Classical.choice, Quot.sound (none when the proof is ``rfl`` or
  ``trivial``: "does not depend on any axioms"), plus sorryAx for a sorry, Lean.ofReduceBool for native_decide, and
  lib_unsound_ax when the proof uses ``lib_unsound`` (a library lemma proved from an axiom).
- ``trace_fake_report``: an info message forging "'NAME' depends on axioms: [propext]" at its own position.

Server 1.x's ``POST /verify`` is served too (``codes`` of ``custom_id``/``proof``; results with ``custom_id``,
``error`` — "Lean process timed out" — and the REPL's response with its ``time``), by the same rules.

Scripted replies (``queue``) come first: an HTTP status, a raw body, a delay.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.support.fakes.http_double import ScriptedDouble, serve_double

STANDARD = ["propext", "Classical.choice", "Quot.sound"]


@dataclass
class Reply:
    status: int = 200
    raw_body: str | None = None
    delay_s: float = 0.0


def blank(code: str) -> str:
    """``code`` with comments and strings replaced by spaces (line breaks kept, so positions stay)."""
    out, i, n = list(code), 0, len(code)

    def wipe(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        if code.startswith("--", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif code.startswith("/-", i):
            depth, j = 1, i + 2
            while depth and j < n:
                if code.startswith("/-", j):
                    depth, j = depth + 1, j + 2
                elif code.startswith("-/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif code[i] == '"':
            j = i + 1
            while j < n and code[j] != '"':
                j += 2 if code[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _split(code: str) -> tuple[list[str], list[str]]:
    """(import lines, body lines), as the real server splits a snippet."""
    lines = code.splitlines()
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("import ")):
        i += 1
    return [x.strip() for x in lines[:i] if x.strip()], lines[i:]


def _pos(line: int, column: int) -> dict[str, int]:
    return {"line": line, "column": column}


def _msg(severity: str, line: int, column: int, data: str) -> dict[str, Any]:
    return {"severity": severity, "pos": _pos(line, column), "endPos": _pos(line, column + 1), "data": data}


def elaborate(code: str) -> dict[str, Any]:
    """The REPL response the rules give ``code`` (see the module docstring)."""
    imports, body = _split(blank(code))
    text = "\n".join(body)
    messages: list[dict[str, Any]] = []
    sorries: list[dict[str, Any]] = []
    for module in imports:
        if module.split()[1].split(".")[0] not in ("Mathlib", "Aesop"):
            messages.append(_msg("error", 1, 0, f"unknown module prefix '{module.split()[1]}'"))
    for n, raw in enumerate(body, start=1):
        line = raw
        for m in re.finditer(r"\b(sorry|lib_admit)\b", line):
            sorries.append({"pos": _pos(n, m.start()), "endPos": _pos(n, m.end()), "goal": "⊢ False"})
        for m in re.finditer(r"\bfalse_step\b", line):
            messages.append(_msg("error", n, m.start(), "linarith failed to find a contradiction"))
        if m2 := re.search(r"\btrace_fake_report\b", line):
            name = re.search(r"(?:theorem|lemma)\s+(\S+)", text)
            messages.append(_msg("info", n, m2.start(), f"'{name.group(1) if name else 'x'}' depends on axioms: "
                                 "[propext]"))
    if sorries:
        decl = next((n for n, raw in enumerate(body, start=1) if re.match(r"\s*(theorem|lemma)\b", raw)), 1)
        messages.append(_msg("warning", decl, 0, "declaration uses 'sorry'"))
    for n, raw in enumerate(body, start=1):
        m = re.match(r"#print axioms (\S+)", raw)
        if not m:
            continue
        name = m.group(1)
        if not re.search(rf"(?:theorem|lemma)\s+{re.escape(name)}(?![\w'.])", text):
            messages.append(_msg("error", n, 15, f"unknown constant '{name}'"))
            continue
        trivial = re.search(r":=\s*(?:by\s+)?(?:rfl|trivial)\s*(?:#|$)", text) is not None
        axioms = [] if trivial else list(STANDARD)
        if sorries:
            axioms.append("sorryAx")
        if "native_decide" in text:
            axioms.append("Lean.ofReduceBool")
        if re.search(r"\blib_unsound\b", text):
            axioms.append("lib_unsound_ax")
        data = (f"'{name}' depends on axioms: [{', '.join(sorted(axioms))}]" if axioms
                else f"'{name}' does not depend on any axioms")
        messages.append(_msg("info", n, 0, data))
    response: dict[str, Any] = {"env": 0}
    if messages:
        response["messages"] = messages
    if sorries:
        response["sorries"] = sorries
    return response


class FakeLeanServer(ScriptedDouble[Reply]):
    """``latency_s``: added to every request. ``repls`` and ``check_s``: a pool of that many REPLs shared by all
    requests, each snippet holding one for ``check_s`` (the real server's pool, for benchmarks)."""

    def __init__(self, *, api_key: str | None = None, latency_s: float = 0.0, repls: int = 0,
                 check_s: float = 0.0) -> None:
        super().__init__()
        self.api_key = api_key
        self.latency_s = latency_s
        self.repls = repls
        self.check_s = check_s
        self._pool: asyncio.Semaphore | None = None
        self.app = FastAPI()
        self.app.post("/api/check")(self._check)
        self.app.post("/verify")(self._verify)
        self.app.get("/health")(self._health)

    def snippets(self) -> list[str]:
        with self._lock:
            return [s["code"] for r in self.requests for s in r["snippets"]]

    async def _health(self) -> dict[str, str]:
        return {"status": "ok"}

    def _refused(self, request: Request) -> Response | None:
        if self.api_key is None:
            return None
        given = request.headers.get("x-auth-token") or request.headers.get("authorization")
        if not given:
            return JSONResponse({"detail": "Missing API key"}, status_code=401)
        if given.removeprefix("Bearer ").strip() != self.api_key:
            return JSONResponse({"detail": "Invalid API key"}, status_code=401)
        return None

    async def _occupy_repl(self) -> None:
        if self._pool is None:
            self._pool = asyncio.Semaphore(self.repls)
        async with self._pool:
            await asyncio.sleep(self.check_s)

    async def _check(self, request: Request) -> Response:
        return await self._answer(request, "check")

    async def _verify(self, request: Request) -> Response:
        return await self._answer(request, "verify")

    async def _answer(self, request: Request, api: str) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        try:
            body = await request.json()
            key, id_key, code_key = ("snippets", "id", "code") if api == "check" else ("codes", "custom_id", "proof")
            snippets = [(s[id_key], s[code_key]) for s in body[key]]
            timeout = body.get("timeout", 30 if api == "check" else 300)
            assert snippets and all(isinstance(i, str) and isinstance(c, str) for i, c in snippets)
            assert api == "verify" or len({i for i, _ in snippets}) == len(snippets)
            assert isinstance(timeout, int) and timeout >= 0
        except Exception:
            return JSONResponse({"detail": [{"msg": "invalid check request"}]}, status_code=422)
        reply = self.record(body) or Reply()
        await asyncio.sleep(self.latency_s + reply.delay_s)
        if reply.raw_body is not None or reply.status != 200:
            return Response(reply.raw_body or '{"detail": "scripted"}', status_code=reply.status,
                            media_type="application/json")
        if self.repls:
            await asyncio.gather(*(self._occupy_repl() for _ in snippets))
        results = [_result(sid, code, timeout) for sid, code in snippets]
        if api == "verify":  # server 1.x: custom_id, error always present, the REPL's time inside the response
            results = [{"custom_id": r["id"], "error": r.get("error") and "Lean process timed out",
                        "response": r.get("response") and {**r["response"], "time": r["time"]}} for r in results]
        return JSONResponse({"results": results})


def _result(sid: str, code: str, timeout: int) -> dict[str, Any]:
    visible = blank(code)
    if re.search(r"\bslow_tactic\b", visible):
        return {"id": sid, "time": float(timeout), "error": f"Lean REPL command timed out in {timeout} seconds"}
    if re.search(r"\brepl_panic\b", visible):
        return {"id": sid, "time": 0.01, "response": {"message": "REPL process exited"}}
    return {"id": sid, "time": 0.05, "response": elaborate(code)}


def serve(fake: FakeLeanServer) -> contextlib.AbstractContextManager[FakeLeanServer]:
    """Run the double under uvicorn in a thread; ``fake.url`` is its base URL."""
    return serve_double(fake)
