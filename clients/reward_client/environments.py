"""Environment sessions: the client side of ``/envs/{name}/...`` (OpenEnv's reset/step/state over HTTP, with a
session id the server hands out at reset).

    with EnvClient("http://127.0.0.1:8000") as envs:
        session = envs.reset("python", reward={"verifier": "math", "reference": "42"})
        envs.step(session, {"code": "x = 6 * 7; print(x)"}).observation   # {"status": "ok", "stdout": "42\\n", ...}
        envs.step(session, {"final_answer": "42"}).reward          # ends the episode with its reward
        envs.close(session)

A reset is an ordinary call: retried through overload (429 ``capacity``, honouring Retry-After), restarts and
connection failures for the client's ``RetryPolicy`` budget, and, with several base URLs, placed on the least-loaded
instance in the rotation (``reward_client.instances``). Every later call of the session (step, state, close) goes to
the instance that opened it and nowhere else: its state lives in that process. When that instance dies, the call
raises ``SessionLost`` at once (a refused or reset connection, a gateway's 502/504, the server's own 410
``session_lost`` after a restart or a reap); an instance that holds a call but stops answering is probed on
``/readyz`` every ``stall_s`` and the call raises ``SessionLost`` when a probe goes unanswered. A step is never sent
twice (it may have run), except after a 429, which says it was not. ``infra_error`` (503) and a 500 raise
``InfraError``. Both are ``EpisodeFailed``: the episode cannot be scored and a trainer masks it; a failed session
stays failed (its later calls raise the same error without a request).
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from reward_client.client import AsyncRewardClient
from reward_client.coalesce import LoopThread
from reward_client.errors import EpisodeFailed, InfraError, RequestRejected, ServiceUnavailable, SessionLost
from reward_client.instances import DEFAULT_STALL_S, PROBE_PATH, STALL_ENV
from reward_client.protocol import Timeout, Urls, join_urls
from reward_client.retry import RetryPolicy, parse_retry_after, trainer_policy

T = TypeVar("T")
PREFIX = "/envs"
STEP_GRACE_S = 30.0  # a step's answer may come this long after its own ``timeout_s`` (the server's cleanup)
LOST_STATUSES = frozenset({410, 502, 504})  # gone, or a gateway with nothing behind it


@dataclass
class Step:
    """One answer of reset, step or close: what the environment shows, the reward (None until the episode is
    scored, or when its verdict is null), and whether the episode is over."""

    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False

    @property
    def verdict(self) -> dict[str, Any] | None:
        """The scoring verdict a terminal observation carries (score, status, reason, details), if any."""
        verdict = self.observation.get("verdict")
        return verdict if isinstance(verdict, dict) else None

    @classmethod
    def from_json(cls, body: Any, path: str) -> Step:
        if not isinstance(body, Mapping) or not isinstance(body.get("observation", {}), Mapping):
            raise RequestRejected(200, f"expected {{observation, reward, done}}, got {body!r:.200}", None, path)
        reward = body.get("reward")
        return cls(dict(body.get("observation") or {}), float(reward) if reward is not None else None,
                   bool(body.get("done", False)))


@dataclass
class Session:
    """One episode: the environment, the id the server gave it, and the base URL of the instance that holds it."""

    env: str
    session_id: str
    url: str
    observation: dict[str, Any] = field(default_factory=dict)  # reset's
    done: bool = False
    reward: float | None = None
    closed: bool = False
    failure: EpisodeFailed | None = None  # set once: every later call raises it

    def fail(self, exc: EpisodeFailed) -> EpisodeFailed:
        if self.failure is None:
            self.failure = exc
        return self.failure


def error_code(response: httpx.Response) -> str:
    """The typed code of an error answer (``{"code": ...}``, ``{"error": {"code": ...}}``, ``{"error": "..."}`` or
    ``{"detail": {"code": ...}}``); empty when there is none."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, Mapping):
        return ""
    for value in (body.get("code"), body.get("error"), body.get("detail")):
        if isinstance(value, str) and value.replace("_", "").isalpha() and value.islower():
            return value
        if isinstance(value, Mapping) and isinstance(value.get("code"), str):
            return str(value["code"])
    return ""


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(body, Mapping):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, Mapping):
                value = value.get("message") or value.get("detail") or value
            if value:
                return str(value)[:300]
    return str(body)[:300]


HIDDEN_KEYS = frozenset({"session_id", "metadata", "verdict", "done", "reward", "episode_id"})


def observation_text(observation: Mapping[str, Any]) -> str:
    """What a model reads of an observation: its ``text`` when the environment renders one, else each field that
    says something (``name:`` then the value; strings as they are, the rest as JSON; an exception as its traceback),
    leaving out bookkeeping (the session id, timings in ``*_ms``, a status of ``ok``, false flags); ``(no output)``
    when nothing is left, so the model is told the call ran."""
    text = observation.get("text")
    if isinstance(text, str):
        return text
    parts = []
    for key, value in observation.items():
        if key in HIDDEN_KEYS or key.endswith("_ms") or value is None or value is False or value in ("", [], {}):
            continue
        if key == "status" and value == "ok":
            continue
        if isinstance(value, Mapping) and isinstance(value.get("traceback"), str) and value["traceback"]:
            value = value["traceback"]
        elif isinstance(value, Mapping) and "type" in value and "message" in value:
            value = f"{value['type']}: {value['message']}"
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        parts.append(f"{key}:\n{shown}" if "\n" in shown else f"{key}: {shown}")
    return "\n".join(parts) or "(no output)"


class _Stalled(Exception):
    pass


class AsyncEnvClient:
    """Asyncio client of the environment routes; see the module docstring. Safe to share between the tasks of one
    event loop (an httpx async client belongs to the loop it is first used on)."""

    def __init__(
        self,
        base_url: Urls = None,
        *,
        token: str | None = None,
        timeout: Timeout = 180.0,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        stall_s: float | None = None,
        max_concurrency: int = 64,
    ) -> None:
        self.service = AsyncRewardClient(base_url, token=token, timeout=timeout, retry=retry, headers=headers,
                                         transport=transport, max_concurrency=max_concurrency)
        self.config = self.service.config
        self.stall_s = float(stall_s if stall_s is not None else os.environ.get(STALL_ENV) or DEFAULT_STALL_S)
        self._schemas: dict[str, dict[str, Any]] = {}

    @property
    def urls(self) -> list[str]:
        return self.config.urls

    def _http(self, url: str) -> httpx.AsyncClient:
        pool = self.service.pool
        if pool is None:
            return self.service._http
        for inst in pool.instances:
            if inst.url == url:
                return inst.http
        raise ValueError(f"session held at {url}, which is not one of this client's instances: {self.urls}")

    def _read_timeout(self, timeout_s: float | None) -> httpx.Timeout:
        base = self.config.http_kwargs()["timeout"]
        if timeout_s is None:
            return base
        read = max(base.read or 0.0, float(timeout_s) + STEP_GRACE_S)
        return httpx.Timeout(base.connect, read=read, write=base.write, pool=base.pool)

    # --- unpinned calls: any instance ---
    async def reset(self, env: str, *, seed: int | None = None, episode_id: str | None = None,
                    reward: Mapping[str, Any] | None = None, **task: Any) -> Session:
        """Open a session of ``env``; ``reward`` (``{verifier, reference, options}``) is how the episode will be
        scored, ``task`` the environment's own task fields (a database, an initial state...)."""
        body: dict[str, Any] = dict(task)
        if seed is not None:
            body["seed"] = seed
        if episode_id is not None:
            body["episode_id"] = episode_id
        if reward is not None:
            body["reward"] = dict(reward)
        path = f"{PREFIX}/{env}/reset"
        pool = self.service.pool
        if pool is not None:
            answer, inst = await pool.placed("POST", path, body)
            url = inst.url
        else:
            answer, url = await self.service.request_json("POST", path, body), self.urls[0]
        step = Step.from_json(answer, path)
        session_id = step.observation.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            raise RequestRejected(200, f"reset gave no session_id: {answer!r:.200}", None, path)
        return Session(env, session_id, url, step.observation, step.done, step.reward)

    async def schema(self, env: str) -> dict[str, Any]:
        """The environment's schemas (``action``, ``observation``, ``reset``: its task fields) and ``tools``
        (``{name, description, inputSchema}``); fetched once per client."""
        if env not in self._schemas:
            body = await self.service.request_json("GET", f"{PREFIX}/{env}/schema")
            self._schemas[env] = dict(body) if isinstance(body, Mapping) else {"schema": body}
        return self._schemas[env]

    async def task_fields(self, env: str) -> set[str]:
        """The task fields the environment's reset takes (it refuses others, naming them)."""
        reset = (await self.schema(env)).get("reset")
        properties = reset.get("properties") if isinstance(reset, Mapping) else None
        return set(properties) if isinstance(properties, Mapping) else set()

    # --- pinned calls: the instance that holds the session ---
    async def step(self, session: Session, action: Mapping[str, Any], timeout_s: float | None = None) -> Step:
        """One action; the server runs it for at most ``timeout_s`` (its default when None)."""
        body: dict[str, Any] = {"action": dict(action), "session_id": session.session_id}
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        path = f"{PREFIX}/{session.env}/step"
        step = Step.from_json(await self._pinned(session, "POST", path, body, self._read_timeout(timeout_s)), path)
        if step.done:
            session.done, session.reward = True, step.reward
        return step

    async def state(self, session: Session) -> dict[str, Any]:
        path = f"{PREFIX}/{session.env}/state"
        body = await self._pinned(session, "GET", path, None, None, params={"session_id": session.session_id})
        return dict(body) if isinstance(body, Mapping) else {"state": body}

    async def close(self, session: Session, score: bool = False) -> Step | None:
        """End the session. The answer carries the episode's reward and verdict when it was scored (with ``score``,
        or earlier by a final answer), else None; a session already closed answers None without a request."""
        if session.closed:
            return None
        path = f"{PREFIX}/{session.env}/close"
        answer = await self._pinned(session, "POST", path, {"session_id": session.session_id, "score": score}, None)
        session.closed = True
        if not isinstance(answer, Mapping) or ("verdict" not in answer and "reward" not in answer):
            return None
        verdict = answer.get("verdict")
        reward = answer.get("reward")
        step = Step({"verdict": verdict} if isinstance(verdict, Mapping) else {},
                    float(reward) if reward is not None else None, True)
        session.done, session.reward = True, step.reward
        return step

    async def discard(self, session: Session) -> None:
        """Close without scoring and without raising: for cleanup, where a lost session is already gone."""
        if session.closed or session.failure is not None:
            return
        try:
            await self.close(session)
        except (EpisodeFailed, RequestRejected, ServiceUnavailable):
            session.closed = True

    async def _pinned(self, session: Session, method: str, path: str, json: Any, timeout: httpx.Timeout | None,
                      params: dict[str, str] | None = None) -> Any:
        if session.failure is not None:
            raise session.failure
        http = self._http(session.url)
        policy = self.config.retry
        started = time.monotonic()
        attempt = 0
        kwargs: dict[str, Any] = {"json": json, "params": params}
        if timeout is not None:
            kwargs["timeout"] = timeout
        while True:
            attempt += 1
            try:
                response = await self._watched(http, http.request(method, path, **kwargs))
            except httpx.TimeoutException as exc:
                raise session.fail(SessionLost(f"{path}: no answer in time ({type(exc).__name__}); the call may "
                                               "have run, so the session's state is unknown",
                                               session.session_id, session.url)) from exc
            except httpx.TransportError as exc:
                raise session.fail(SessionLost(f"{path}: the instance is gone ({type(exc).__name__}: {exc})",
                                               session.session_id, session.url)) from exc
            except _Stalled as exc:
                raise session.fail(SessionLost(f"{path}: {exc}", session.session_id, session.url)) from None
            status = response.status_code
            if status < 300:
                return response.json()
            code = error_code(response)
            if status == 429 and code != SessionLost.code:  # not run: wait here, as the server asked
                wait = policy.delay(attempt, parse_retry_after(response.headers.get("retry-after")))
                elapsed = time.monotonic() - started
                if policy.exhausted(attempt, elapsed, wait):
                    raise ServiceUnavailable(f"{path} answered 429 at {session.url}: {_message(response)}", attempt,
                                             429)
                await asyncio.sleep(wait)
                continue
            if code == SessionLost.code or status in LOST_STATUSES:
                raise session.fail(SessionLost(f"{path} answered {status}: {_message(response)}",
                                               session.session_id, session.url))
            if code == InfraError.code or status >= 500:
                raise session.fail(InfraError(f"{path} answered {status}: {_message(response)}",
                                              session.session_id, session.url))
            raise RequestRejected(status, _message(response), None, path)

    async def _watched(self, http: httpx.AsyncClient, call: Coroutine[Any, Any, httpx.Response]) -> httpx.Response:
        """``call``'s response, while checking every ``stall_s`` that the instance still answers ``/readyz``: a
        process that hangs holding the call raises ``_Stalled`` instead of waiting out the read timeout."""
        task = asyncio.ensure_future(call)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.stall_s)
                if task in done:
                    return task.result()
                probe = asyncio.ensure_future(http.get(PROBE_PATH, timeout=self.stall_s))
                done, _ = await asyncio.wait({task, probe}, return_when=asyncio.FIRST_COMPLETED)
                if task in done:
                    probe.cancel()
                    return task.result()
                try:
                    probe.result()  # any answer, ready or not, says the process lives
                except httpx.TransportError as exc:
                    raise _Stalled(f"the instance stopped answering {PROBE_PATH} ({type(exc).__name__}) while "
                                   "holding the call") from exc
        finally:
            if not task.done():
                task.cancel()

    async def aclose(self) -> None:
        await self.service.aclose()

    async def __aenter__(self) -> AsyncEnvClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str | None], AsyncEnvClient]] = (
    weakref.WeakKeyDictionary())


def loop_client(url: str | Sequence[str] | None, token: str | None = None) -> AsyncEnvClient:
    """The async client of the running event loop for these settings, with the trainer adapters' retry policy: one
    per loop (an httpx async client belongs to the loop it is used on; a loop's clients go with it)."""
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (join_urls(url), token)
    if key not in per_loop:
        per_loop[key] = AsyncEnvClient(key[0] or None, token=token, retry=trainer_policy())
    return per_loop[key]


class EnvClient:
    """Blocking client: the async client's calls, run on a private event loop thread (so one code path decides
    where a session's calls go). Safe to share between threads; a forked child makes its own."""

    def __init__(self, base_url: Urls = None, **kwargs: Any) -> None:
        self._url = join_urls(base_url)
        self._kwargs = kwargs
        self._loop = LoopThread("reward-client-envs")
        self._lock = threading.Lock()
        self._client: AsyncEnvClient | None = None
        self._pid = 0

    def _run(self, make: Any) -> Any:
        async def call() -> Any:
            with self._lock:
                if self._client is None or self._pid != os.getpid():
                    self._client, self._pid = AsyncEnvClient(self._url or None, **self._kwargs), os.getpid()
                client = self._client
            return await make(client)

        return asyncio.run_coroutine_threadsafe(call(), self._loop.loop()).result()

    def reset(self, env: str, **kwargs: Any) -> Session:
        result: Session = self._run(lambda c: c.reset(env, **kwargs))
        return result

    def step(self, session: Session, action: Mapping[str, Any], timeout_s: float | None = None) -> Step:
        result: Step = self._run(lambda c: c.step(session, action, timeout_s))
        return result

    def state(self, session: Session) -> dict[str, Any]:
        result: dict[str, Any] = self._run(lambda c: c.state(session))
        return result

    def close(self, session: Session, score: bool = False) -> Step | None:
        result: Step | None = self._run(lambda c: c.close(session, score))
        return result

    def discard(self, session: Session) -> None:
        self._run(lambda c: c.discard(session))

    def schema(self, env: str) -> dict[str, Any]:
        result: dict[str, Any] = self._run(lambda c: c.schema(env))
        return result

    def task_fields(self, env: str) -> set[str]:
        result: set[str] = self._run(lambda c: c.task_fields(env))
        return result

    def shutdown(self) -> None:
        """Close the client's connections (``close`` ends a session)."""
        client, self._client = self._client, None
        if client is not None and self._pid == os.getpid():
            asyncio.run_coroutine_threadsafe(client.aclose(), self._loop.loop()).result()
        self._loop.stop()

    def __enter__(self) -> EnvClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
