"""Calling a live server's sandbox routes, one sandbox driven directly, and programs that load a compiler."""
from __future__ import annotations

import asyncio
from typing import Self

from sandbox.api import Limits, RunRequest, RunResult
from sandbox.bwrap import BwrapBackend, BwrapConfig
from tests.support.server import LiveServer


def run(srv: LiveServer, code: str, **body: object) -> dict:
    with srv.client(timeout=120) as c:
        r = c.post("/v1/sandbox/run", json={"code": code, **body})
    assert r.status_code == 200, r.text
    return r.json()


def still_serving(srv: LiveServer) -> None:
    assert srv.proc.poll() is None, "the server died"
    with srv.client() as c:
        assert c.get("/healthz").status_code == 200
        ok = c.post("/v1/sandbox/run", json={"code": "print(6 * 7)"}).json()
    assert ok["status"] == "ok" and ok["stdout"] == "42\n"


class LoopedBackend:
    """A bubblewrap backend on an event loop of its own, for tests that call it synchronously; ``start`` fills its
    warm pool before the first run (else the first run does). A context manager: leaving closes both."""

    def __init__(self, config: BwrapConfig, *, start: bool = True) -> None:
        self.loop = asyncio.new_event_loop()
        self.backend = BwrapBackend(config)
        if start:
            self.loop.run_until_complete(self.backend.start())

    def submit(self, request: RunRequest) -> RunResult:
        return self.loop.run_until_complete(self.backend.run(request))

    def close(self) -> None:
        self.loop.run_until_complete(self.backend.close())
        self.loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OneSandbox(LoopedBackend):
    def __init__(self) -> None:
        super().__init__(BwrapConfig(warm_pool=1, max_concurrent=1), start=False)

    def run(self, code: str, stdin: str = "", files: dict[str, str] | None = None, collect: list[str] | None = None,
            limits: Limits | None = None, network: str = "loopback") -> RunResult:
        request = RunRequest(code=SUPERVISOR + code, stdin=stdin, files=files or {}, collect=collect or [],
                             limits=limits or Limits(wall_s=10), network=network)
        result = self.submit(request)
        # one run after another, as a caller that waits for each: the sandbox is back in the pool before the next
        self.loop.run_until_complete(self.backend._pool.settled())
        return result


def same_sandbox(*results: RunResult) -> None:
    assert len({supervisor(r) for r in results}) == 1, "the runs did not share a sandbox: the test proves nothing"


# ~200k template instantiations: several CPU seconds of g++, far over a 1 s compile budget.
HEAVY_TEMPLATES = """template <int N, int M> struct A {
  static constexpr unsigned v = (A<N-1, M>::v + A<N, M-1>::v) % 1000; };
template <int M> struct A<0, M> { static constexpr unsigned v = 1; };
template <int N> struct A<N, 0> { static constexpr unsigned v = 1; };
int main() { return A<440, 440>::v & 1; }
"""


# which sandbox a run ran in: the supervisor's user namespace (every run of a sandbox is in it; ns inodes are reused
# once freed) and when the sandbox's root was built (bwrap's tmpfs, sealed read-only; nanoseconds). Each run has a
# pid namespace of its own, so pid 1 tells runs apart, not sandboxes.
SUPERVISOR = ("import os as _os\nprint('SUPERVISOR', _os.readlink('/proc/self/ns/user'), _os.stat('/').st_mtime_ns)\n")


def supervisor(result: RunResult) -> str:
    line = next((x for x in result.stdout.splitlines() if x.startswith("SUPERVISOR ")), "")
    assert line, result
    return line
