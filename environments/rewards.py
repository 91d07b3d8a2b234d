"""Rewards inside the episode: ``reset`` may carry a reward spec in the ``/v1/verify`` item's shape (``verifier``,
``reference``, ``options``); when the episode ends, that verifier scores the session's transcript, as the messages of
a trajectory item (the task's user message, then per step an assistant tool call and the tool's result, then the
final answer as the last assistant turn). The verdict (status, score, reason, details, turn_scores) is the terminal
observation's ``verdict`` and its score the step's reward; a verdict with no score gives a reward of null, never 0.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from environments.errors import InvalidRequest
from verifiers.engine import Engine
from verifiers.engine.registry import UnknownVerifier
from verifiers.types import VerifyItem

MAX_TRANSCRIPT_MESSAGES = 2048


@dataclass(frozen=True)
class RewardSpec:
    verifier: str
    reference: Any = None
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Any) -> RewardSpec | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise InvalidRequest("reward must be an object {verifier, reference?, options?}", field="reward")
        unknown = set(raw) - {"verifier", "reference", "options"}
        if unknown:
            raise InvalidRequest(f"reward has unknown fields: {', '.join(sorted(unknown))}", field="reward")
        verifier = raw.get("verifier")
        if not isinstance(verifier, str) or not verifier:
            raise InvalidRequest("reward.verifier must name a verifier", field="reward.verifier")
        options = raw.get("options") or {}
        if not isinstance(options, dict):
            raise InvalidRequest("reward.options must be an object", field="reward.options")
        return cls(verifier, raw.get("reference"), options)


@dataclass
class Transcript:
    """The episode as OpenAI chat messages, as a trajectory item carries them."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    @classmethod
    def opening(cls, task: BaseModel) -> Transcript:
        prompt = getattr(task, "prompt", None)
        return cls([{"role": "user", "content": prompt}] if isinstance(prompt, str) and prompt else [])

    def call(self, tool: str, arguments: dict[str, Any], result: str) -> None:
        if len(self.messages) + 2 > MAX_TRANSCRIPT_MESSAGES:
            return  # the steps past the cap are not scored; the final answer always is
        self.calls += 1
        call_id = f"call_{self.calls}"
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": tool, "arguments": json.dumps(arguments, ensure_ascii=False)}}]})
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": result})

    def answer(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def final_text(self) -> str:
        last = self.messages[-1] if self.messages else None
        if last and last.get("role") == "assistant" and isinstance(last.get("content"), str):
            return str(last["content"])
        return ""


class EngineScorer:
    """Scores transcripts with the service's verifier engine (the ``/v1/verify`` path, as a trajectory item)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def check(self, spec: RewardSpec) -> None:
        """At reset: an unknown verifier or bad options is the request's fault, named now (not at the episode's end)."""
        try:
            self.engine.prepare(VerifyItem(verifier=spec.verifier, response="", reference=spec.reference,
                                           options=spec.options))
        except UnknownVerifier as exc:
            raise InvalidRequest(str(exc), field="reward.verifier") from None
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err.get("loc", ()))
            raise InvalidRequest(f"reward.options invalid for {spec.verifier!r}: {where}: {err.get('msg')}",
                                 field="reward.options") from None

    async def score(self, spec: RewardSpec, transcript: Transcript) -> dict[str, Any]:
        verdict = await self.engine.verify(VerifyItem(
            verifier=spec.verifier, response=transcript.final_text(), reference=spec.reference,
            options=spec.options, messages=list(transcript.messages)))
        return verdict.to_dict()
