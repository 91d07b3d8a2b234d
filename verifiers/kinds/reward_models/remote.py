"""Reward models served by vLLM or SGLang: the same inputs as the local path, scored over HTTP.

The service keeps the tokenizer and builds each input itself (``Encoder``: prompt framing, steps, markers inserted
as ids, planted markers dropped), then sends token ids, so the server scores exactly the sequence the local path
would, and the step positions are known here. Wire formats:

- vLLM ``POST /pooling`` (PRMs): ``{"model", "input": [[ids], ...], "task": "token_classify", "use_activation":
  false}`` -> ``{"data": [{"index", "data": [[logit, ...] per step]}], "usage"}``. With STEP pooling the server
  returns one row per step-tag token; with ALL pooling one row per token, read here at the step positions.
- vLLM ``POST /classify`` (ORMs): ``{"model", "input": [[ids], ...], "use_activation": false}`` ->
  ``{"data": [{"index", "probs": [logit, ...], "num_classes"}], "usage"}``.
- SGLang ``POST /classify`` (ORMs, native API): ``{"input_ids": [[ids], ...]}`` -> ``[{"embedding": [score, ...],
  "meta_info": {...}}, ...]`` in input order.

Activation is asked off and applied here by the local path's rule, so a remote score equals the local one whatever
the server's default activation. Concurrent callers' sequences are coalesced into requests of at most
``max_items_per_request`` (and ``max_batch_tokens``), with at most ``max_concurrency`` in flight.

Trouble is named: a server that stays unreachable (connection errors, timeouts, 429/5xx after retries, a refused key
or unknown model) raises ``ServerUnavailable`` (a ``VerifierUnavailable``: the verdict is ``unavailable``, never a
0); an answer of the wrong shape is ``MalformedAnswer`` for the items it concerns; a request the server rejects
(4xx, e.g. too long) is ``RequestRejected``, and a rejected multi-item request is resent item by item so only the
offending item fails.
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from verifiers.kinds.http_calls import Failures, RetryPolicy, send_with_retries
from verifiers.kinds.reward_models.batcher import Coalescer, _Pending
from verifiers.kinds.reward_models.formats import Encoded, Encoder
from verifiers.kinds.reward_models.spec import ModelSpec
from verifiers.types import VerifierUnavailable

log = logging.getLogger(__name__)

Result = list[float] | BaseException


class ServerUnavailable(VerifierUnavailable):
    """The model server could not be reached or refused to serve (after retries)."""


class MalformedAnswer(Exception):
    """The server answered 200 with something that is not the promised shape."""


class RequestRejected(Exception):
    """The server refused this request (4xx other than auth/rate limits): the input, not the server, is at fault."""


# --- scores from the server's raw head outputs ----------------------------------------------------------------------
def _softmax_at(row: Sequence[float], index: int) -> float:
    top = max(row)
    exps = [math.exp(x - top) for x in row]
    return exps[index] / math.fsum(exps)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def head_score(spec: ModelSpec, row: Sequence[float]) -> float:
    """One score from one row of raw head outputs, by the local path's rule: step_tag P(good) over (good, bad);
    a one-logit head its sigmoid (PRMs, or ORMs with orm_activation sigmoid) or the raw value; else
    softmax at ``positive_label``."""
    if spec.format == "step_tag":
        if len(row) != 2:
            raise MalformedAnswer(f"a step_tag row must hold 2 values (good, bad), got {len(row)}")
        return _softmax_at(row, 0)
    if len(row) == 1:
        return _sigmoid(row[0]) if (spec.kind == "prm" or spec.orm_activation == "sigmoid") else row[0]
    if spec.positive_label >= len(row):
        raise MalformedAnswer(f"positive_label {spec.positive_label} but rows hold {len(row)} classes")
    return _softmax_at(row, spec.positive_label)


def _row(value: Any) -> list[float]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in items):
        raise MalformedAnswer(f"expected a list of numbers, got {str(value)[:80]}")
    row = [float(x) for x in items]
    if not all(math.isfinite(x) for x in row):
        raise MalformedAnswer("the server sent a non-finite value")
    return row


def _check_raw(rows: Sequence[Sequence[float]]) -> None:
    """Rows of two or more values that are all probability distributions mean the server applied its activation
    although the request asked it not to (a server older than ``use_activation``); scoring them again would
    silently give wrong scores."""
    if rows and all(len(r) >= 2 and min(r) >= 0.0 and abs(math.fsum(r) - 1.0) < 1e-5 for r in rows):
        raise MalformedAnswer("the rows are already probabilities: the server ignored use_activation=false "
                              "(a vLLM older than the use_activation field?)")


def step_scores(spec: ModelSpec, seq: Encoded, data: Any) -> list[float]:
    """Step scores of one sequence from a /pooling ``data`` entry: one row per step (STEP pooling) or one row
    per token (ALL pooling, read at the step positions). Any other count is malformed."""
    if not isinstance(data, list):
        raise MalformedAnswer(f"pooling data is {type(data).__name__}, not a list")
    rows = [_row(r) for r in data]
    n = len(seq.positions)
    if len(rows) != n:
        if len(rows) != len(seq.ids):
            raise MalformedAnswer(
                f"the server returned {len(rows)} step scores for {n} steps (and the input has {len(seq.ids)} tokens)")
        rows = [rows[p] for p in seq.positions]
    _check_raw(rows)
    return [head_score(spec, r) for r in rows]


def _indexed(body: Any, n: int) -> list[Any]:
    """The ``data`` entries of an OpenAI-style list reply, in input order (checked against ``index``)."""
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise MalformedAnswer(f"reply has no 'data' list: {str(body)[:120]}")
    entries = body["data"]
    if len(entries) != n:
        raise MalformedAnswer(f"the server returned {len(entries)} results for {n} inputs")
    out: list[Any] = [None] * n
    for pos, entry in enumerate(entries):
        index = entry.get("index", pos) if isinstance(entry, dict) else None
        if not isinstance(index, int) or not 0 <= index < n or out[index] is not None:
            raise MalformedAnswer(f"result {pos} has a missing, duplicate or out-of-range index")
        out[index] = entry
    return out


def parse_reply(spec: ModelSpec, seqs: Sequence[Encoded], body: Any) -> list[Result]:
    """Per-sequence scores (a list of one for an ORM) or the MalformedAnswer for that sequence; a reply whose
    overall shape is wrong raises MalformedAnswer for the whole request."""
    if spec.backend == "sglang":
        entries = [body] if isinstance(body, dict) and len(seqs) == 1 else body
        if not isinstance(entries, list) or len(entries) != len(seqs):
            raise MalformedAnswer(f"expected a list of {len(seqs)} results, got {str(body)[:120]}")
        values = [e.get("embedding") if isinstance(e, dict) else None for e in entries]
    else:
        key = "data" if spec.kind == "prm" else "probs"
        values = [e.get(key) if isinstance(e, dict) else None for e in _indexed(body, len(seqs))]
    out: list[Result] = []
    for seq, value in zip(seqs, values):
        try:
            if spec.kind == "prm":
                out.append(step_scores(spec, seq, value))
            else:
                row = _row(value)
                if spec.backend == "vllm":
                    _check_raw([row])
                out.append([head_score(spec, row)])
        except MalformedAnswer as exc:
            out.append(MalformedAnswer(f"{spec.backend} server: {exc}"))
    return out


def _error_message(response: httpx.Response) -> str:
    """The message of a vLLM/SGLang error body ({"message"} or {"error": {"message"}}), else the text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])[:300]
        if isinstance(body.get("message"), str):
            return str(body["message"])[:300]
    return response.text[:300]


# --- the client -------------------------------------------------------------------------------------------------
@dataclass
class RemoteStats:
    requests: int = 0
    sequences: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    batch_sizes: list[int] = field(default_factory=list)


class RemoteScorer(Coalescer):
    """Scores encoded sequences on a vLLM/SGLang server; same ``score``/``close`` as the local ``Batcher``, but
    batches go out as concurrent HTTP requests (at most ``max_concurrency`` in flight) instead of one at a time."""

    def __init__(self, spec: ModelSpec, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not spec.url:
            raise ValueError(f"reward model {spec.name!r} has no url")
        super().__init__(max_batch_tokens=spec.max_batch_tokens, max_batch_size=spec.max_items_per_request,
                         max_wait_ms=spec.max_wait_ms)
        self.spec = spec
        self.stats = RemoteStats()
        self.path = "/classify" if spec.kind == "orm" else "/pooling"
        key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        if spec.api_key_env and not key:
            raise ValueError(f"reward model {spec.name!r}: environment variable {spec.api_key_env} is not set")
        self._client = httpx.AsyncClient(
            base_url=spec.url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=httpx.Timeout(spec.timeout_s, connect=min(spec.timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=spec.max_concurrency,
                                max_keepalive_connections=spec.max_concurrency),
            transport=transport,
        )
        self._slots = asyncio.Semaphore(spec.max_concurrency)
        self._sending: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:  # never shows the key
        return f"RemoteScorer({self.spec.backend} {self.spec.url}{self.path}, model={self.model!r})"

    @property
    def model(self) -> str:
        return self.spec.remote_model or self.spec.path

    async def close(self) -> None:
        await self._stop(ServerUnavailable("reward model client is shutting down"))
        for task in list(self._sending):
            task.cancel()
        await asyncio.gather(*self._sending, return_exceptions=True)
        await self._client.aclose()

    async def _dispatch(self, taken: list[_Pending]) -> None:
        for batch in self._plan(taken):
            await self._slots.acquire()  # back-pressure: at most max_concurrency requests in flight
            task = asyncio.get_running_loop().create_task(self._send(batch))
            self._sending.add(task)
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        self._slots.release()

    async def _send(self, batch: list[_Pending]) -> None:
        results: list[Result] = [ServerUnavailable("reward model client is shutting down")] * len(batch)
        try:
            results = await self.score_now([p.seq for p in batch])
        except Exception as exc:
            results = [exc] * len(batch)
        finally:  # also when cancelled by close(): no caller is left waiting
            for p, r in zip(batch, results):
                self._settle(p, r)

    # --- one request ---------------------------------------------------------------------------------------
    def payload(self, seqs: Sequence[Encoded]) -> dict[str, Any]:
        ids = [list(s.ids) for s in seqs]
        if self.spec.backend == "sglang":
            return {"input_ids": ids}
        body: dict[str, Any] = {"model": self.model, "input": ids, "use_activation": False}
        if self.spec.kind == "prm" and self.spec.pooling_task:
            body["task"] = self.spec.pooling_task
        return body

    async def score_now(self, seqs: Sequence[Encoded]) -> list[Result]:
        """One request for ``seqs`` (no coalescing); a rejected multi-item request is resent item by item."""
        try:
            body = await self._post(self.payload(seqs))
        except RequestRejected as exc:
            if len(seqs) == 1:
                return [exc]
            log.info("%s rejected a batch of %d (%s); resending one by one", self, len(seqs), exc)
            return [r for s in seqs for r in await self.score_now([s])]
        self.stats.sequences += len(seqs)
        self.stats.batch_sizes.append(len(seqs))
        del self.stats.batch_sizes[:-1000]
        return parse_reply(self.spec, seqs, body)

    async def _fetch(self, payload: dict[str, Any]) -> httpx.Response:
        """POST and read the reply, refusing one larger than ``max_reply_mb`` (a misconfigured pooler returning
        vocabulary-sized rows, or a hostile server, must not exhaust this process's memory)."""
        limit = int(self.spec.max_reply_mb * 1024 * 1024)
        async with self._client.stream("POST", self.path, json=payload) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise MalformedAnswer(f"the reply is {int(declared):,} bytes, over max_reply_mb "
                                      f"({self.spec.max_reply_mb:g} MiB)")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise MalformedAnswer(f"the reply is over max_reply_mb ({self.spec.max_reply_mb:g} MiB)")
        headers = [(k, v) for k, v in response.headers.items()
                   if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]  # body is decoded
        return httpx.Response(response.status_code, headers=headers, content=bytes(body), request=response.request)

    async def _post(self, payload: dict[str, Any]) -> Any:
        spec = self.spec
        where = f"{spec.backend} server {spec.url}{self.path}"

        async def send() -> httpx.Response:
            self.stats.requests += 1
            return await self._fetch(payload)

        def on_retry() -> None:
            self.stats.retries += 1

        failures = Failures.worded(where, ServerUnavailable, RequestRejected, detail=_error_message,
                                   request="the input")
        response = await send_with_retries(
            send, RetryPolicy(spec.max_retries, spec.retry_backoff_s, 20.0), failures, log=log,
            what=f"reward model {spec.name}", timeout_s=spec.timeout_s, hinted_wait=lambda s: min(s, 60.0),
            on_retry=on_retry, describe=lambda r: f"HTTP {r.status_code}: {_error_message(r)[:120]}")
        try:
            body = response.json()
        except ValueError:
            raise MalformedAnswer(f"{where} sent a body that is not JSON: {response.text[:120]!r}") from None
        usage = body.get("usage") if isinstance(body, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            self.stats.prompt_tokens += usage["prompt_tokens"]
        return body


# --- what the hub holds for a served model -----------------------------------------------------------------------
@dataclass
class RemoteModel:
    """A served model: the local encoder (tokenizer only) and the client that scores on the server."""

    spec: ModelSpec
    encoder: Encoder
    max_length: int


def load_remote(spec: ModelSpec) -> RemoteModel:
    """Load only the tokenizer (``path``); the weights stay on the server."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(spec.path, trust_remote_code=spec.trust_remote_code)
    limit = spec.max_length or int(min(getattr(tokenizer, "model_max_length", 0) or 10**9, 10**9))
    return RemoteModel(spec, Encoder(spec, tokenizer), limit)
