"""Judge backends: an OpenAI-compatible chat-completions client and a local transformers model.

Both expose ``async complete(messages, sampling) -> str``. Trouble is named: a backend that stays down (connection
errors, timeouts, 429/5xx after retries, a refused key) raises ``VerifierUnavailable``; a reply the protocol does not
allow raises ``JudgeError``. Neither can turn into a score.
"""
from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import httpx

from sandbox.api import run_client, run_priority
from verifiers.context import request_source
from verifiers.kinds.http_calls import Failures, RetryPolicy, send_with_retries
from verifiers.kinds.judges.ratelimit import Clock, Grant, LimiterStats, Limits, RateLimiter
from verifiers.types import VerifierFailed, VerifierUnavailable

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]

class JudgeError(VerifierFailed):
    """The judge answered, but not with something usable (bad request, malformed completion)."""


@dataclass(frozen=True)
class Sampling:
    """Generation settings; ``sample`` tells k-vote samples apart (it is part of the cache key, not the request)."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = None
    sample: int = 0

    def as_key(self) -> dict[str, Any]:
        return asdict(self)


class JudgeBackend(Protocol):
    name: str
    model: str
    ready: bool

    async def start(self) -> None: ...

    async def complete(self, messages: Messages, sampling: Sampling) -> str: ...

    async def aclose(self) -> None: ...


class TokenEstimate:
    """Tokens a call will be charged, guessed before it is sent: the prompt's characters at a characters-per-token
    ratio learned from the server's ``usage`` (3 until the first reply: prose runs near 4, code and maths lower,
    so the first guesses err high), plus the whole ``max_tokens`` budget, as providers reserve it."""

    PER_MESSAGE = 4  # role and separators of the chat template

    def __init__(self, chars_per_token: float = 3.0) -> None:
        self.chars_per_token = chars_per_token

    def prompt_chars(self, messages: Messages) -> int:
        return sum(len(m.get("content", "")) for m in messages)

    def __call__(self, messages: Messages, max_tokens: int) -> int:
        prompt = math.ceil(self.prompt_chars(messages) / self.chars_per_token) + self.PER_MESSAGE * len(messages)
        return prompt + max_tokens

    def learn(self, messages: Messages, prompt_tokens: int) -> None:
        chars = self.prompt_chars(messages)
        if prompt_tokens > 0 and chars > 0:
            seen = max(0.5, chars / prompt_tokens)
            self.chars_per_token = 0.8 * self.chars_per_token + 0.2 * seen


def usage_tokens(body: Any) -> tuple[int, int] | None:
    """(prompt tokens, total tokens) from a completion's ``usage``; None when the server sent none."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, completion, total = (usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if not isinstance(prompt, int) or isinstance(prompt, bool):
        return None
    if not isinstance(total, int) or total <= 0:  # some servers send 0 or leave it out
        total = prompt + (completion if isinstance(completion, int) else 0)
    return prompt, total


class OpenAIChatBackend:
    """POST {base_url}/chat/completions with pooled connections, jittered retries, and one gate (``RateLimiter``)
    for the concurrency cap, the rate limits and Retry-After pauses, taken in turns by request."""

    kind = "openai"

    def __init__(
        self,
        name: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        max_concurrency: int = 16,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        backoff_max_s: float = 20.0,
        json_mode: bool = False,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        burst: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_max_s = backoff_max_s
        self.retry = RetryPolicy(max_retries, backoff_s, backoff_max_s)
        self._failures = Failures.worded(f"judge backend {self.name!r}", VerifierUnavailable, JudgeError)
        self.json_mode = json_mode
        self.ready = True
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
        )
        self.limiter = RateLimiter(
            Limits(requests_per_minute, tokens_per_minute, burst, max_concurrency), clock)
        self.estimate = TokenEstimate()

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIChatBackend(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        await self.limiter.aclose(VerifierUnavailable(f"judge backend {self.name!r} shut down"))
        await self._client.aclose()

    def limiter_stats(self) -> LimiterStats:
        return self.limiter.stats()

    def _payload(self, messages: Messages, sampling: Sampling) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "n": 1,
        }
        if sampling.seed is not None:
            payload["seed"] = sampling.seed + sampling.sample
        if self.json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    async def complete(self, messages: Messages, sampling: Sampling) -> str:
        payload = self._payload(messages, sampling)
        body: Any = None

        async def send() -> httpx.Response:
            nonlocal body
            tokens = self.estimate(messages, sampling.max_tokens)
            async with self.limiter.slot(request_source.get(), tokens, run_client.get(),
                                         run_priority.get()) as grant:
                response = await self._client.post("/chat/completions", json=payload)
                body = self._charge(grant, messages, response)
            return response

        def pause(seconds: float) -> float:
            """Every call of this backend waits a Retry-After out, this retry in the gate's queue."""
            self.limiter.pause(min(seconds, self.backoff_max_s))
            return 0.0

        response = await send_with_retries(send, self.retry, self._failures, log=log, what=f"judge {self.name}",
                                           timeout_s=self.timeout_s, hinted_wait=pause)
        return self._content(response, body)

    def _charge(self, grant: Grant, messages: Messages, response: httpx.Response) -> Any:
        """Correct the call's estimated tokens from the usage it reports; a refused call (429) used none."""
        body: Any = None
        if response.status_code == 200:
            try:
                body = response.json()
            except ValueError:
                return None
            used = usage_tokens(body)
            if used is not None:
                self.estimate.learn(messages, used[0])
                self.limiter.settle(grant, used[1])
        elif response.status_code == 429:
            self.limiter.settle(grant, 0)
        return body

    def _content(self, response: httpx.Response, body: Any) -> str:
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise JudgeError(
                f"judge backend {self.name!r} sent a malformed completion: {response.text[:200]!r}"
            ) from None
        if not isinstance(content, str):
            raise JudgeError(f"judge backend {self.name!r} sent a completion without text content")
        return content


@dataclass
class _Pending:
    messages: Messages
    sampling: Sampling
    future: asyncio.Future[str]


class TransformersBackend:
    """A local causal LM. Concurrent calls are gathered into left-padded batches; generation runs in a thread so
    the event loop keeps serving while the model works."""

    kind = "transformers"

    def __init__(
        self,
        name: str,
        model_path: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        max_batch_size: int = 8,
        batch_wait_ms: float = 5.0,
    ) -> None:
        self.name = name
        self.model = model_path
        self.device_spec = device
        self.dtype = dtype
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000.0
        self.ready = False
        self.failure: str | None = None
        self.batches_run = 0
        self._tokenizer: Any = None
        self._model: Any = None
        self._device: str = "cpu"
        self._queue: asyncio.Queue[_Pending] | None = None
        self._loaded: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Load in the background: /readyz waits on ``ready`` while the server already answers probes."""
        self._queue = asyncio.Queue()
        self._loaded = asyncio.Event()
        self._tasks = [asyncio.create_task(self._load_then_serve(), name=f"judge-{self.name}")]

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._queue is not None:
            while not self._queue.empty():
                pending = self._queue.get_nowait()
                if not pending.future.done():
                    pending.future.set_exception(VerifierUnavailable(f"judge backend {self.name!r} shut down"))

    async def _load_then_serve(self) -> None:
        assert self._loaded is not None
        try:
            await asyncio.to_thread(self._load)
        except Exception as exc:  # a broken model path must name itself, not crash the server
            self.failure = f"{type(exc).__name__}: {str(exc)[:300]}"
            log.error("judge backend %s: could not load %s: %s", self.name, self.model, self.failure)
        finally:
            self.ready = True
            self._loaded.set()
        if self.failure is None:
            await self._serve()

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = self.device_spec
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype: Any = "auto" if self.dtype == "auto" else getattr(torch, self.dtype)
        tokenizer = AutoTokenizer.from_pretrained(self.model)
        tokenizer.padding_side = "left"  # decoder-only: new tokens must follow the prompt directly
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if tokenizer.chat_template is None:
            raise ValueError(f"{self.model} has no chat template")
        model = AutoModelForCausalLM.from_pretrained(self.model, dtype=dtype).to(device)  # type: ignore[arg-type]  # transformers stubs: .to() typed as taking a model
        model.eval()
        self._tokenizer, self._model, self._device = tokenizer, model, device

    async def complete(self, messages: Messages, sampling: Sampling) -> str:
        if self._loaded is None or self._queue is None:
            raise VerifierUnavailable(f"judge backend {self.name!r} was not started")
        await self._loaded.wait()
        if self.failure is not None:
            raise VerifierUnavailable(f"judge backend {self.name!r} could not load its model: {self.failure}")
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(messages, sampling, future))
        return await future

    async def _next_batch(self) -> list[_Pending]:
        assert self._queue is not None
        batch = [await self._queue.get()]
        deadline = asyncio.get_running_loop().time() + self.batch_wait_s
        while len(batch) < self.max_batch_size:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0 and self._queue.empty():
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), max(remaining, 0.0)))
            except TimeoutError:
                break
        return [p for p in batch if not p.future.done()]  # callers that gave up cost nothing

    async def _serve(self) -> None:
        while True:
            batch = await self._next_batch()
            groups: dict[tuple[Any, ...], list[_Pending]] = {}
            for pending in batch:  # one generate() call needs one set of sampling settings
                s = pending.sampling
                groups.setdefault((s.temperature, s.top_p, s.max_tokens, s.seed), []).append(pending)
            for group in groups.values():
                try:
                    texts = await asyncio.to_thread(self.generate, [p.messages for p in group], group[0].sampling)
                except Exception as exc:
                    error = JudgeError(f"local judge {self.name!r} failed to generate: {type(exc).__name__}: {exc}")
                    for p in group:
                        if not p.future.done():
                            p.future.set_exception(error)
                    continue
                for p, text in zip(group, texts):
                    if not p.future.done():
                        p.future.set_result(text)

    def generate(self, conversations: list[Messages], sampling: Sampling) -> list[str]:
        """One left-padded batch through ``model.generate``; returns only the new text of each row."""
        import torch

        tok = self._tokenizer
        prompts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in conversations]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self._device)
        kwargs: dict[str, Any] = {"max_new_tokens": sampling.max_tokens, "pad_token_id": tok.pad_token_id}
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed + sampling.sample)
        else:
            kwargs.update(do_sample=False)
        with torch.inference_mode():
            out = self._model.generate(**enc, **kwargs)
        self.batches_run += 1
        decoded: list[str] = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        return decoded
