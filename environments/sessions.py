"""Sessions: one environment instance per episode, kept by the server across plain HTTP calls, WebSockets and MCP.

The server owns every lifetime: an idle TTL and a hard lifetime, reaped in the background; an explicit close; a
maximum of open sessions per instance and per client (a typed ``capacity`` error with Retry-After); creation taking
turns by client (``sandbox.fairslots``). A session's id carries this instance's id (``<instance>-<random>``), so a
client with several instances routes by it, and an id of another instance (or of this one before a restart) is
``session_lost``, never a fresh episode. A session that ended (reaped, closed, its sandbox gone) leaves a short
record of why, so the next call says so.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from environments.base import FINAL_ANSWER, Environment, EnvResources, Step
from environments.errors import Capacity, EnvError, InfraError, InvalidRequest, SessionLost, UnknownEnvironment
from environments.rewards import RewardSpec, Transcript
from sandbox.fairslots import FairSlots

log = logging.getLogger("environments")

ENDED_RECORDS = 10_000  # why recent sessions ended, for the next call naming one


@dataclass
class EnvSettings:
    idle_ttl_s: float = 900.0
    lifetime_s: float = 3600.0
    max_sessions: int = 1024  # open at once on this instance
    max_sessions_per_client: int = 256
    creating_at_once: int = 8  # sessions being created at once (their turns go by client)
    step_timeout_s: float = 30.0  # a step naming no timeout_s
    max_step_timeout_s: float = 300.0
    reap_interval_s: float = 1.0
    retry_after_s: int = 1
    instance: str = ""  # this instance's id in session ids; "" draws one at start

    def __post_init__(self) -> None:
        self.instance = self.instance or secrets.token_hex(4)
        if "-" in self.instance:
            raise ValueError("an instance id cannot hold '-' (it ends the instance part of a session id)")


class Observer(Protocol):
    """What the service counts (``/metrics``)."""

    def opened(self, env: str) -> None: ...
    def stepped(self, env: str, seconds: float) -> None: ...
    def ended(self, env: str, why: str) -> None: ...


class _Quiet:
    def opened(self, env: str) -> None:
        return None

    def stepped(self, env: str, seconds: float) -> None:
        return None

    def ended(self, env: str, why: str) -> None:
        return None


@dataclass
class Session:
    id: str
    env_name: str
    env: Environment
    client: str
    episode_id: str | None
    reward: RewardSpec | None
    transcript: Transcript
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    steps: int = 0
    done: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    verdict: dict[str, Any] | None = None
    attached: int = 0  # WebSockets on it now (informational: a socket's end never ends a session)
    holds_slot: bool = True  # counted against the maximums until its episode is done or it ends

    def touch(self) -> None:
        self.last_used = time.monotonic()


class Scorer(Protocol):
    """Scores an episode's transcript (``environments.rewards.EngineScorer``)."""

    def check(self, spec: RewardSpec) -> None: ...
    async def score(self, spec: RewardSpec, transcript: Transcript) -> dict[str, Any]: ...


class SessionManager:
    def __init__(self, environments: dict[str, type[Environment]], resources: EnvResources, settings: EnvSettings,
                 scorer: Scorer | None = None, observer: Observer | None = None) -> None:
        self.environments = environments
        self.resources = resources
        self.settings = settings
        self.scorer = scorer
        self.observer: Observer = observer or _Quiet()
        self.sessions: dict[str, Session] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._creating = 0
        self._live = 0  # sessions holding a slot (not done)
        self._per_client: dict[str, int] = {}
        self._turns = FairSlots(settings.creating_at_once)
        self._reaper: asyncio.Task[None] | None = None
        self.stats = {"created": 0, "steps": 0, "reaped": 0, "lost": 0, "closed": 0, "capacity_refused": 0}

    # --- lifetime ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.create_task(self._reap_forever())

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(BaseException):
                await self._reaper
        await asyncio.gather(*(self._end(s, "the instance shut down") for s in list(self.sessions.values())),
                             return_exceptions=True)

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reap_interval_s)
            try:
                await self.reap()
            except Exception:
                log.exception("reaping sessions failed")

    async def reap(self) -> int:
        """End every session idle past the TTL or older than the lifetime; how many."""
        now = time.monotonic()
        s = self.settings
        due = [(x, f"reaped: idle for more than {s.idle_ttl_s:g}s") for x in self.sessions.values()
               if now - x.last_used > s.idle_ttl_s and not x.lock.locked()]
        due += [(x, f"reaped: older than the session lifetime of {s.lifetime_s:g}s") for x in self.sessions.values()
                if now - x.created > s.lifetime_s]
        for session, why in due:
            if session.id in self.sessions:
                self.stats["reaped"] += 1
                await self._end(session, why)
        return len(due)

    def _free_slot(self, session: Session) -> None:
        """A session whose episode is done holds nothing (its environment is closed): it leaves the maximums at once,
        though its record (state, verdict) stays until it is closed or reaped."""
        if session.holds_slot:
            session.holds_slot = False
            self._live -= 1
            self._per_client[session.client] = self._per_client.get(session.client, 1) - 1
            if self._per_client[session.client] <= 0:
                self._per_client.pop(session.client, None)

    async def _end(self, session: Session, why: str) -> None:
        if self.sessions.pop(session.id, None) is None:
            return
        self._free_slot(session)
        self._ended[session.id] = why
        while len(self._ended) > ENDED_RECORDS:
            self._ended.popitem(last=False)
        self.observer.ended(session.env_name, why.split(":")[0])
        try:
            await session.env.close()
        except Exception:
            log.exception("closing session %s failed", session.id)

    # --- finding a session ------------------------------------------------------------------------------------

    def env_class(self, name: str) -> type[Environment]:
        cls = self.environments.get(name)
        if cls is None:
            raise UnknownEnvironment(f"no environment named {name!r}; this server offers: "
                                     f"{', '.join(sorted(self.environments))}", environment=name)
        return cls

    def get(self, name: str, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is not None:
            if session.env_name != name:
                raise InvalidRequest(f"session {session_id} is a {session.env_name!r} session, not {name!r}",
                                     field="session_id")
            return session
        why = self._ended.get(session_id)
        if why is None:
            instance = session_id.split("-", 1)[0] if "-" in session_id else ""
            why = ("unknown session id" if instance == self.settings.instance else
                   f"the session belongs to instance {instance!r}, not this one ({self.settings.instance!r}): "
                   "route it there; if that instance restarted, the session is gone")
        raise SessionLost(f"session {session_id} is gone: {why}", session_id=session_id)

    # --- reset, step, state, close ----------------------------------------------------------------------------

    async def create(self, name: str, body: dict[str, Any], client: str,
                     resources: EnvResources | None = None) -> tuple[Session, dict[str, Any]]:
        """A new session and its first observation. ``body``: reset's fields (seed, episode_id, reward, task);
        ``resources``: the service's own unless the caller sets limits of its own (``/run_jupyter``'s memory)."""
        cls = self.env_class(name)
        seed = body.get("seed")
        episode_id = body.get("episode_id")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise InvalidRequest("seed must be a non-negative integer", field="seed")
        if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
            raise InvalidRequest("episode_id must be a string of at most 255 characters", field="episode_id")
        reward = RewardSpec.parse(body.get("reward"))
        task_fields = {k: v for k, v in body.items() if k not in ("seed", "episode_id", "reward", "session_id")}
        try:
            task = cls.task_model.model_validate(task_fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err.get("loc", ())) or "body"
            raise InvalidRequest(f"reset field {where}: {err.get('msg')}", field=where) from exc
        if reward is not None:
            if self.scorer is None:
                raise InvalidRequest("this server cannot score episodes (no verifier engine)", field="reward")
            self.scorer.check(reward)
        self._admit(client)
        self._creating += 1
        self._per_client[client] = self._per_client.get(client, 0) + 1
        registered = False
        env = cls(resources or self.resources)
        try:
            async with self._turns.hold(object(), client):
                first = await env.reset(task, seed)
            session = Session(f"{self.settings.instance}-{secrets.token_hex(12)}", name, env, client, episode_id,
                              reward, Transcript.opening(task))
            self.sessions[session.id] = session
            self._live += 1
            registered = True
            self.stats["created"] += 1
            self.observer.opened(name)
            return session, {**first, "session_id": session.id}
        except EnvError:
            raise
        except Exception as exc:
            log.exception("creating a %s session failed", name)
            raise InfraError(f"cannot create a {name} session: {type(exc).__name__}: {exc}") from exc
        finally:
            self._creating -= 1
            if not registered:
                self._per_client[client] -= 1
                if self._per_client[client] <= 0:
                    self._per_client.pop(client, None)
                with contextlib.suppress(Exception):
                    await asyncio.shield(env.close())

    def _admit(self, client: str) -> None:
        s = self.settings
        open_now = self._live + self._creating
        if open_now >= s.max_sessions:
            self.stats["capacity_refused"] += 1
            raise Capacity(f"this instance holds its maximum of {s.max_sessions} sessions", s.retry_after_s,
                           scope="instance", max_sessions=s.max_sessions)
        if self._per_client.get(client, 0) >= s.max_sessions_per_client:
            self.stats["capacity_refused"] += 1
            raise Capacity(f"this client holds its maximum of {s.max_sessions_per_client} sessions",
                           s.retry_after_s, scope="client", max_sessions=s.max_sessions_per_client)

    def step_timeout(self, value: Any) -> float:
        s = self.settings
        if value is None:
            return s.step_timeout_s
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= s.max_step_timeout_s:
            raise InvalidRequest(f"timeout_s must be a number in (0, {s.max_step_timeout_s:g}]", field="timeout_s")
        return float(value)

    async def step(self, session: Session, action: Any, timeout_s: float) -> tuple[dict[str, Any], float | None, bool]:
        """One action: (observation, reward, done). The terminal observation carries the verdict when the episode
        has a reward spec."""
        if not isinstance(action, dict):
            raise InvalidRequest("action must be an object", field="action")
        async with session.lock:
            if session.id not in self.sessions:
                self.get(session.env_name, session.id)  # raises session_lost with the reason
            if session.done:
                raise InvalidRequest("the episode is done; reset to start another", field="action")
            session.touch()
            started = time.perf_counter()
            if FINAL_ANSWER in action:
                answer = action[FINAL_ANSWER]
                if set(action) != {FINAL_ANSWER} or not isinstance(answer, str):
                    raise InvalidRequest("a final answer is {\"final_answer\": <string>} alone",
                                         field=f"action.{FINAL_ANSWER}")
                session.transcript.answer(answer)
                step = Step({"status": "final_answer"}, done=True)
            else:
                parsed = self._action(session.env, action)
                try:
                    step = await session.env.step(parsed, timeout_s)
                except SessionLost:
                    self.stats["lost"] += 1
                    await self._end(session, "lost: its sandbox is gone")
                    raise
                except InfraError:
                    self.stats["lost"] += 1
                    await self._end(session, "lost: its sandbox failed")
                    raise
                session.transcript.call(session.env.tool_of(parsed), action, step.transcript_text)
            session.steps += 1
            session.touch()
            self.stats["steps"] += 1
            self.observer.stepped(session.env_name, time.perf_counter() - started)
            obs = {**step.observation, "session_id": session.id}
            reward = step.reward
            if step.done:
                session.done = True
                reward, verdict = await self._score(session, reward)
                if verdict is not None:
                    obs["verdict"] = verdict
                await session.env.close()
                self._free_slot(session)
            return obs, reward, step.done

    def _action(self, env: Environment, action: dict[str, Any]) -> BaseModel:
        try:
            return env.action_model.model_validate(action)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err.get("loc", ()))
            raise InvalidRequest(f"action.{where}: {err.get('msg')}" if where else f"action: {err.get('msg')}",
                                 field=f"action.{where}" if where else "action") from exc

    async def _score(self, session: Session, step_reward: float | None) -> tuple[float | None, dict[str, Any] | None]:
        if session.reward is None or self.scorer is None:
            return step_reward, None
        verdict = await self.scorer.score(session.reward, session.transcript)
        session.verdict = verdict
        score = verdict.get("score")
        return (float(score) if isinstance(score, int | float) else None), verdict

    def state(self, session: Session) -> dict[str, Any]:
        session.touch()
        now = time.monotonic()
        return {"episode_id": session.episode_id, "step_count": session.steps, "session_id": session.id,
                "environment": session.env_name, "done": session.done,
                "idle_expires_in_s": round(self.settings.idle_ttl_s, 3),
                "lifetime_left_s": round(max(0.0, self.settings.lifetime_s - (now - session.created)), 3),
                "verdict": session.verdict, **session.env.state()}

    async def finish(self, session: Session, score: bool) -> dict[str, Any]:
        """Close a session; with ``score``, score the transcript first (an episode ended without a final answer)."""
        async with session.lock:
            result: dict[str, Any] = {"session_id": session.id, "closed": True}
            if score and not session.done:
                session.done = True
                await session.env.close()
                reward, verdict = await self._score(session, None)
                result.update(reward=reward, verdict=verdict)
            elif session.verdict is not None:
                result.update(reward=session.verdict.get("score"), verdict=session.verdict)
            self.stats["closed"] += 1
            await self._end(session, "closed: by its client")
            return result

    def summary(self) -> dict[str, Any]:
        by_env: dict[str, int] = {}
        for session in self.sessions.values():
            by_env[session.env_name] = by_env.get(session.env_name, 0) + 1
        return {"instance": self.settings.instance, "open": len(self.sessions), "live": self._live,
                "creating": self._creating,
                "by_environment": by_env, **self.stats}
