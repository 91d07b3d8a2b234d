"""Wire models of the HTTP API. The verdict fields mirror ``verifiers.types.Verdict``."""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from verifiers.conversation import final_text
from verifiers.types import VerifyItem


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"] = Field(description="Only text parts: a trajectory is scored on its text and tool calls.")
    text: str


class RefusalPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["refusal"] = Field(description="OpenAI's refusal part of an assistant turn: no text to score.")
    refusal: str


Content = str | list[TextPart]
AssistantContent = str | list[Annotated[TextPart | RefusalPart, Field(discriminator="type")]]


class _NullIsAbsent(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _null_means_absent(cls, data: Any) -> Any:
        # SDK dumps and columnar files (parquet, datasets) write every key any message has, null where it has none:
        # a null field is an absent one (an assistant turn's null content stays null, its default).
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


class FunctionCall(_NullIsAbsent):
    """What the model wrote for one call. Every part of it is the model's output, so none is checked here: a missing
    or 10,000-character name, arguments that are not JSON or not an object, a tool that does not exist are the
    model's mistakes, scored by the verifier (bounded by the conversation's size limit)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="The function called; missing: a malformed call, scored.")
    arguments: str | None = Field(None, description="The arguments as the JSON text the model wrote, as OpenAI and "
                                                    "vLLM send them; any other JSON value (an object, as TRL and verl "
                                                    "hold them, a list, a number) is written as its JSON text.")

    @model_validator(mode="before")
    @classmethod
    def _arguments_as_text(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("arguments") is not None and not isinstance(data["arguments"], str):
            try:
                text = json.dumps(data["arguments"], ensure_ascii=False)
            except (ValueError, TypeError, RecursionError):  # nested past what JSON can write back: unreadable
                text = "<arguments that cannot be written as JSON>"
            data = {**data, "arguments": text}
        return data


class ToolCall(_NullIsAbsent):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, max_length=1000, description="Named by the tool result answering it; a call no "
                                                              "result answers may have none.")
    type: Literal["function"] = "function"
    index: int | None = Field(None, description="The call's position, as streamed deltas carry it; ignored.")
    function: FunctionCall = Field(default_factory=FunctionCall)


class _Message(_NullIsAbsent):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, max_length=1000, description="OpenAI's optional participant name.")


class SystemMessage(_Message):
    role: Literal["system"]
    content: Content


class UserMessage(_Message):
    role: Literal["user"]
    content: Content


class AssistantMessage(_Message):
    """A model's turn. Its fields are the model's output, so an empty turn (content null, "" or missing, no calls or
    ``tool_calls: []``, only reasoning) is a valid message: the verifiers score it as the empty output it is."""

    role: Literal["assistant"]
    content: AssistantContent | None = Field(None, description="Null or missing: the turn wrote no text; a refusal "
                                                                "part holds none either.")
    tool_calls: list[ToolCall] | None = None
    refusal: str | None = None
    reasoning_content: str | None = Field(
        None, description="Reasoning text some servers return beside the content (vLLM, DeepSeek); never scored.")
    reasoning: str | None = Field(None, description="The same under the name newer servers use; never scored.")
    annotations: list[Any] | None = Field(None, description="OpenAI's URL citations; ignored.")


class ToolMessage(_Message):
    role: Literal["tool"]
    content: Content
    tool_call_id: str = Field(..., min_length=1, max_length=1000,
                              description="The id of the earlier assistant tool call this result answers.")


Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]


class VerifyItemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, description="Echoed back in the result.")
    verifier: str = Field(
        ..., min_length=1, max_length=200, description="A registered verifier name (GET /v1/verifiers).")
    response: str | None = Field(
        None, description="The model output to check; give this or `messages`, not both.")
    messages: list[Message] | None = Field(
        None, min_length=1, description="A trajectory as OpenAI chat messages (system/user/assistant/tool), instead "
        "of `response`: text verifiers score the final assistant turn, judges see the whole conversation.")
    tools: list[dict[str, Any]] | None = Field(
        None, description="The OpenAI tool specs the model was given, with `messages` or with a plain `response` "
        "(the text the model generated, calls read from it with the specs' types).")
    reference: Any = Field(None, description="Gold answer, tests, rubric...: its shape depends on the verifier.")
    options: dict[str, Any] = Field(default_factory=dict, description="Verifier options (see its options_schema).")
    group: str | None = Field(None, description="Items sharing a group id form one GRPO group.")
    _dicts: list[dict[str, Any]] | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _one_output(self) -> VerifyItemIn:
        if (self.response is None) == (self.messages is None):
            raise ValueError("give exactly one of response (a string) or messages (a conversation)")
        return self

    def message_dicts(self) -> list[dict[str, Any]] | None:
        """The messages as plain dicts for the verifiers (fields left unset are left out), made once: the limits
        and the library item read the same list."""
        if self.messages is None:
            return None
        if self._dicts is None:
            # An assistant turn of tool calls keeps its null content, as OpenAI writes it.
            self._dicts = [{"content": None, **m.model_dump(exclude_none=True)} for m in self.messages]
        return self._dicts

    def to_verify_item(self) -> VerifyItem:
        """The library's item: a trajectory's response is the text of its final assistant turn."""
        messages = self.message_dicts()
        response = self.response if messages is None else final_text(messages)
        return VerifyItem(verifier=self.verifier, response=response or "", reference=self.reference,
                          options=self.options, id=self.id, group=self.group, messages=messages, tools=self.tools)


class VerifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[VerifyItemIn]


class VerifyResult(BaseModel):
    id: str | None
    verifier: str
    score: float | None
    status: str
    reason: str
    details: dict[str, Any]
    elapsed_ms: float
    turn_scores: list[float] | None = Field(
        None, description="One score per assistant turn, from verifiers that define per-turn scores.")


class GroupStats(BaseModel):
    count: int
    null_count: int
    mean: float | None
    std: float | None = Field(description="Population standard deviation of the non-null scores.")
    all_equal: bool = Field(description="Every item scored and all scores equal: the group carries no signal.")


class VerifyResponse(BaseModel):
    results: list[VerifyResult]
    groups: dict[str, GroupStats] | None = Field(
        None, description="Per-group statistics, present when any item carries a group id."
    )


def json_text(result: dict[str, Any]) -> str:
    """A verdict as JSON text, for the answers written one verdict at a time (a job's results, a streamed
    ``/v1/verify``): orjson writes one in well under a microsecond, a sixth of the json module's time, which is most
    of what those paths add per inline item. A value orjson cannot write (an integer past 64 bits, a set in a
    plugin's details) goes through the json module, which writes the first and names the second's error."""
    try:
        return orjson.dumps(result, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()
    except TypeError:
        return json.dumps(result)
