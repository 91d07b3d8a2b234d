"""Verifiers that misbehave on purpose, loaded through the real plugin setting
(``REWARD_SERVICE_EXTRA_VERIFIER_MODULES``) to exercise deadlines, crashes and back-pressure."""
from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from verifiers.base import BaseOptions, Verifier
from verifiers.conversation import assistant_turns, content_text, current
from verifiers.types import Verdict, VerifierUnavailable


class SleepOptions(BaseOptions):
    seconds: float = 0.5


class Sleep(Verifier):
    name = "test_sleep"
    Options = SleepOptions

    def check(self, response: str, reference: Any, options: SleepOptions) -> Verdict:
        time.sleep(options.seconds)
        return Verdict.ok(1.0, "slept", pid=os.getpid())


class PidSleepOptions(BaseOptions):
    pid_dir: str
    seconds: float = 60.0


class PidSleep(Verifier):
    """Leaves its worker's pid in ``pid_dir`` as it starts, then sleeps: a test sees which processes ran the check
    and whether they are still alive."""

    name = "test_pid_sleep"
    Options = PidSleepOptions

    def check(self, response: str, reference: Any, options: PidSleepOptions) -> Verdict:
        path = os.path.join(options.pid_dir, f"{os.getpid()}-{time.monotonic_ns()}.pid")
        with open(path, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(options.seconds)
        return Verdict.ok(1.0, "slept", pid=os.getpid())


class GateOptions(BaseOptions):
    path: str


class Gate(Verifier):
    """Holds its worker until ``path`` exists: a slow check whose end the test decides, not a clock."""

    name = "test_gate"
    Options = GateOptions

    def check(self, response: str, reference: Any, options: GateOptions) -> Verdict:
        while not os.path.exists(options.path):
            time.sleep(0.01)
        return Verdict.ok(1.0, "opened", pid=os.getpid())


class Hang(Verifier):
    name = "test_hang"

    def check(self, response: str, reference: Any, options: BaseOptions) -> Verdict:
        while True:  # a pathological input: only a kill stops it
            pass


class Crash(Verifier):
    name = "test_crash"

    def check(self, response: str, reference: Any, options: BaseOptions) -> Verdict:
        os._exit(3)


class Raise(Verifier):
    name = "test_raise"

    def check(self, response: str, reference: Any, options: BaseOptions) -> Verdict:
        raise RuntimeError("boom from a buggy verifier")


class Down(Verifier):
    name = "test_down"
    execution = "async"

    async def acheck(self, response: str, reference: Any, options: BaseOptions, ctx: Any) -> Verdict:
        await asyncio.sleep(0)
        raise VerifierUnavailable("judge backend refused the connection")


class Print(Verifier):
    name = "test_print"

    def check(self, response: str, reference: Any, options: BaseOptions) -> Verdict:
        print("noise on stdout must not corrupt the worker protocol")
        return Verdict.ok(1.0, "printed")


class TurnsOptions(BaseOptions):
    count_tools: bool = False  # score the number of tool specs instead


class Turns(Verifier):
    """Reads the bound trajectory where a real trajectory verifier would (in a worker process): each assistant turn
    scores 1 when it made a tool call, so a test can tell the per-turn scores crossed every hop."""

    name = "test_turns"
    Options = TurnsOptions

    def check(self, response: str, reference: Any, options: TurnsOptions) -> Verdict:
        trajectory = current()
        if trajectory is None:
            return Verdict.ok(0.0, "no trajectory bound", pid=os.getpid())
        turns = assistant_turns(trajectory.messages)
        scores = [float(bool(trajectory.messages[i].get("tool_calls"))) for i in turns]
        score = float(len(trajectory.tools or ())) if options.count_tools else sum(scores) / len(scores)
        verdict = Verdict.ok(score, "tool-call turns", pid=os.getpid(), response=response,
                             roles=[m["role"] for m in trajectory.messages],
                             texts=[content_text(trajectory.messages[i].get("content")) for i in turns],
                             tools=[t.get("function", t).get("name") for t in trajectory.tools or ()])
        verdict.turn_scores = scores
        return verdict


VERIFIERS: list[Verifier] = [Sleep(), PidSleep(), Gate(), Hang(), Crash(), Raise(), Down(), Print(), Turns()]
