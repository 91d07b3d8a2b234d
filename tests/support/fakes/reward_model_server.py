"""A test double of a vLLM or SGLang server hosting a reward model: a real FastAPI app under uvicorn on loopback.

It runs a real transformers model (the tiny random ones the tests build) and answers in the servers' wire formats:

- vLLM: ``POST /pooling`` (token-level pooling: STEP keeps the rows at ``step_tag_id`` tokens, ALL every row;
  ``returned_token_ids`` selects columns of a causal LM's logits, as ``--pooler-config`` does), ``POST /classify``
  (``data: [{index, label, probs, num_classes}]``), ``GET /v1/models``, ``GET /health``; activation (softmax, or
  sigmoid for one class) unless ``use_activation`` is false; error bodies ``{"object": "error", "message", ...}``.
- SGLang: native ``POST /classify`` (``{"input_ids"}`` -> ``[{"embedding", "meta_info"}]``, raw head outputs).

Scripted trouble: ``fail_next`` (statuses answered before any real work, with optional Retry-After), ``mangle``
(edits a reply body before it is sent), ``delay_s`` (a slow server), ``max_model_len`` (over-long inputs get
vLLM's 400). Every request is
counted in ``requests`` as (path, number of inputs).
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.support.fakes.http_double import serve_double


@dataclass
class Fault:
    status: int = 500
    retry_after: str | None = None


@dataclass
class RewardServerDouble:
    model: Any  # a transformers model: token classification, causal LM (with returned_token_ids) or sequence cls
    flavor: str = "vllm"  # vllm | sglang
    served_name: str = "rm"
    step_tag_id: int | None = None
    returned_token_ids: list[int] | None = None
    pooling: str = "STEP"  # STEP | ALL (token-level pooling of /pooling)
    max_model_len: int | None = None
    api_key: str | None = None
    fail_next: deque[Fault] = field(default_factory=deque)
    mangle: Callable[[Any], Any] | None = None
    delay_s: float = 0.0  # before answering (a slow or hung server)
    requests: list[tuple[str, int]] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()  # one model, one forward pass at a time (one GPU)
        self.app = FastAPI()
        self.app.get("/health")(lambda: {})
        self.app.get("/v1/models")(lambda: {"object": "list", "data": [{"id": self.served_name, "object": "model"}]})
        self.app.post("/pooling")(self._pooling)
        self.app.post("/classify")(self._classify)

    # --- the model ------------------------------------------------------------------------------------------
    def _token_logits(self, batch: list[list[int]]) -> list[Any]:
        """Per-token head outputs of each sequence (one right-padded forward pass), columns as the pooler picks."""
        import torch

        width = max(len(x) for x in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, x in enumerate(batch):
            ids[row, : len(x)] = torch.tensor(x)
            mask[row, : len(x)] = 1
        with self._lock, torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask).logits.float()
        if self.returned_token_ids is not None:
            logits = logits[..., self.returned_token_ids]
        return [logits[row, : len(x)] for row, x in enumerate(batch)]

    def _sequence_logits(self, x: list[int]) -> Any:
        import torch

        with self._lock, torch.inference_mode():
            return self.model(input_ids=torch.tensor([x])).logits[0].float()

    @staticmethod
    def _activate(t: Any) -> Any:
        import torch

        return torch.sigmoid(t) if t.shape[-1] == 1 else torch.softmax(t, dim=-1)

    # --- the wire -------------------------------------------------------------------------------------------
    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        kind = {400: "BadRequestError", 401: "Unauthorized", 404: "NotFoundError"}.get(status, "InternalServerError")
        body: dict[str, Any] = {"object": "error", "message": message, "type": kind, "param": None, "code": status}
        if self.flavor == "sglang":
            body = {"error": {"message": message, "type": kind, "code": status}}
        return JSONResponse(body, status_code=status, headers=headers)

    async def _admit(self, request: Request, path: str, key: str) -> tuple[dict[str, Any], Any]:
        """(body, the token-id lists) or (body, the refusal to send)."""
        body = await request.json()
        seqs = body.get(key)
        refused = self._gate(request, path, body, len(seqs) if isinstance(seqs, list) else 1)
        await asyncio.sleep(self.delay_s)  # counted on arrival, answered late
        return body, refused if refused is not None else self._inputs(seqs)

    def _gate(self, request: Request, path: str, body: dict[str, Any], n: int) -> JSONResponse | None:
        self.requests.append((path, n))
        if self.fail_next:
            fault = self.fail_next.popleft()
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else None
            return self._error(fault.status, "scripted failure", headers)
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        if self.flavor == "vllm" and body.get("model") not in (None, self.served_name):
            return self._error(404, f"The model `{body.get('model')}` does not exist.")
        return None

    def _inputs(self, value: Any) -> list[list[int]] | JSONResponse:
        if isinstance(value, list) and value and all(isinstance(t, int) for t in value):
            value = [value]
        if not (isinstance(value, list) and value and all(
                isinstance(x, list) and x and all(isinstance(t, int) for t in x) for x in value)):
            return self._error(400, "this double accepts token ids only (a list of int lists)")
        for x in value:
            if self.max_model_len is not None and len(x) > self.max_model_len:
                return self._error(400, f"This model's maximum context length is {self.max_model_len} tokens. "
                                        f"However, you requested {len(x)} tokens in the input.")
        return value

    def _reply(self, body: Any) -> JSONResponse:
        return JSONResponse(self.mangle(body) if self.mangle else body)

    async def _pooling(self, request: Request) -> JSONResponse:
        body, batch = await self._admit(request, "/pooling", "input")
        if isinstance(batch, JSONResponse):
            return batch
        data = []
        for i, (x, logits) in enumerate(zip(batch, self._token_logits(batch))):
            if self.pooling == "STEP" and self.step_tag_id is not None:
                logits = logits[[k for k, t in enumerate(x) if t == self.step_tag_id]]
            if body.get("use_activation", True):
                logits = self._activate(logits)
            data.append({"index": i, "object": "pooling", "data": logits.tolist()})
        return self._reply(self._envelope("pool", data, batch))

    async def _classify(self, request: Request) -> JSONResponse:
        body, batch = await self._admit(request, "/classify", "input_ids" if self.flavor == "sglang" else "input")
        if isinstance(batch, JSONResponse):
            return batch
        outputs = [self._sequence_logits(x) for x in batch]
        if self.flavor == "sglang":
            return self._reply([
                {"embedding": out.tolist(), "meta_info": {"id": uuid.uuid4().hex, "prompt_tokens": len(x),
                                                          "e2e_latency": 0.0}}
                for x, out in zip(batch, outputs)])
        data = []
        for i, out in enumerate(outputs):
            probs = self._activate(out) if body.get("use_activation", True) else out
            data.append({"index": i, "label": f"LABEL_{int(out.argmax())}", "probs": probs.tolist(),
                         "num_classes": int(out.shape[-1])})
        return self._reply(self._envelope("classify", data, batch))

    def _envelope(self, prefix: str, data: list[dict[str, Any]], batch: list[list[int]]) -> dict[str, Any]:
        tokens = sum(len(x) for x in batch)
        return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": "list", "created": int(time.time()),
                "model": self.served_name, "data": data,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0,
                          "prompt_tokens_details": None}}

    def items(self, path: str | None = None) -> int:
        return sum(n for p, n in self.requests if path is None or p == path)


def serve(double: RewardServerDouble) -> contextlib.AbstractContextManager[RewardServerDouble]:
    """Run the double under uvicorn in a thread; ``double.url`` is its base URL."""
    return serve_double(double)


def load_double(path: str, kind: str, **kwargs: Any) -> RewardServerDouble:
    """A double serving the model saved at ``path``; kind: token_classification, causal_lm or
    sequence_classification (the classes the tests' builders write)."""
    import transformers

    cls = {"token_classification": transformers.AutoModelForTokenClassification,
           "causal_lm": transformers.AutoModelForCausalLM,
           "sequence_classification": transformers.AutoModelForSequenceClassification}[kind]
    return RewardServerDouble(cls.from_pretrained(path).eval(), **kwargs)
