"""Stand-ins for vLLM in the OpenRLHF adapter tests: engines that "generate" given text, so everything around
generation (decoding, reward calls, agent steps) is OpenRLHF's own code."""
from __future__ import annotations

from types import SimpleNamespace

PROMPT = "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n"


class FixedEngine:
    """Stands in for vLLM: 'generates' the given text."""

    def __init__(self, tokenizer, text: str) -> None:
        self.ids = tokenizer(text=text, add_special_tokens=False)["input_ids"]
        self.text = text

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        out = SimpleNamespace(token_ids=self.ids, text=self.text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


class ScriptedEngine:
    """Stands in for vLLM over several turns: 'generates' the next scripted action each call."""

    def __init__(self, tokenizer, actions: list[str]) -> None:
        self.engines = [FixedEngine(tokenizer, a) for a in actions]

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        return await self.engines.pop(0).generate(prompt_token_ids, sampling_params, multi_modal_data)
