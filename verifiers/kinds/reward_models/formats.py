"""Input layouts of the PRM/ORM formats: token ids plus the positions whose head output is a score.

Ids are assembled from separately tokenized pieces and the marker (separator or step tag) is inserted as an id, so
score positions are known by construction. Step text is tokenized with ``split_special_tokens=True`` and any
marker id it still yields (a tag such as ``ки`` is an ordinary token) is dropped: a policy that writes ``<extra_0>``
or ``ки`` into its answer cannot plant extra markers.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verifiers.kinds.reward_models.spec import ModelSpec

_SENTINEL = "\ue000RESPONSE\ue000"


@dataclass
class Encoded:
    """One model input: token ids and the indices (into ``ids``) at which scores are read."""

    ids: list[int]
    positions: list[int]

    def __len__(self) -> int:
        return len(self.ids)


def resolve_token_id(tokenizer: Any, token: str) -> int:
    """The id of ``token``: itself when it is one vocabulary entry, else the last id it encodes to."""
    tid = tokenizer.convert_tokens_to_ids(token)
    if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid >= 0:
        return tid
    ids = tokenizer.encode(token, add_special_tokens=False)
    if not ids:
        raise ValueError(f"token {token!r} encodes to nothing with this tokenizer")
    return int(ids[-1])


class Encoder:
    """Builds model inputs for one model; holds only what it resolved from the spec and tokenizer."""

    def __init__(self, spec: ModelSpec, tokenizer: Any) -> None:
        self.spec = spec
        self.tok = tokenizer
        # The hub encodes in worker threads, several callers at once, and a fast tokenizer is not safe to share
        # across threads: encodings came out different now and then. One encoding at a time per model.
        self._encoding = threading.Lock()
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if spec.template == "chat" and not has_template:
            raise ValueError(f"model {spec.name!r}: template 'chat' asked for but the tokenizer has no chat template")
        self.chat = spec.template == "chat" or (spec.template == "auto" and has_template)
        self.marker_id: int | None = None
        if spec.format == "step_tag":
            self.marker_id = resolve_token_id(tokenizer, spec.step_tag)
        elif spec.separator is not None and spec.format in ("separator", "token_classification"):
            self.marker_id = resolve_token_id(tokenizer, spec.separator)
        self.newline_ids: list[int] = list(tokenizer.encode("\n", add_special_tokens=False))

    # --- framing: what surrounds the response -------------------------------------------------------------
    def _frames(self, prompts: Sequence[str]) -> list[tuple[str, str]]:
        if not self.chat:
            return [(f"{p}\n" if p else "", "") for p in prompts]
        frames = []
        for p in prompts:
            messages = [{"role": "user", "content": p}, {"role": "assistant", "content": _SENTINEL}]
            if self.spec.system_prompt is not None:
                messages.insert(0, {"role": "system", "content": self.spec.system_prompt})
            text = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
            head, found, tail = text.partition(_SENTINEL)
            if not found:
                raise ValueError(f"model {self.spec.name!r}: the chat template drops the assistant message")
            frames.append((head, tail))
        return frames

    def _ids(self, texts: list[str], *, plain_text: bool) -> list[list[int]]:
        if not texts:
            return []
        out = self.tok(texts, add_special_tokens=False, split_special_tokens=plain_text)["input_ids"]
        return [list(x) for x in out]

    def _prefix_ids(self, heads: list[str]) -> list[list[int]]:
        ids = self._ids(heads, plain_text=False)
        bos = getattr(self.tok, "bos_token_id", None)
        if not self.chat and bos is not None and getattr(self.tok, "add_bos_token", True):
            # Plain layout: start like tokenizer(text) would (Math-Shepherd style), templates carry their own.
            ids = [x if x[:1] == [bos] else [bos, *x] for x in ids]
        return ids

    # --- layouts -------------------------------------------------------------------------------------------
    def encode_steps(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[Encoded]:
        """PRM inputs: a score position after each step."""
        with self._encoding:
            return self._encode_steps(items)

    def _encode_steps(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[Encoded]:
        frames = self._frames([p for p, _ in items])
        prefixes = self._prefix_ids([h for h, _ in frames])
        flat = [s for _, steps in items for s in steps]
        step_ids = iter(self._ids(flat, plain_text=True))
        fmt = self.spec.format
        marker = self.marker_id
        out = []
        for (_, steps), prefix in zip(items, prefixes):
            ids = list(prefix)
            positions = []
            for k in range(len(steps)):
                piece = next(step_ids)
                if marker is not None and marker in piece:  # an ordinary-token tag (ки) typed by the policy
                    piece = [t for t in piece if t != marker]
                if fmt == "token_classification" and self.marker_id is None:
                    if k:
                        ids.extend(self.newline_ids)
                    ids.extend(piece)
                    positions.append(len(ids) - 1)
                    continue
                ids.extend(piece)
                if marker is None:  # every format but token_classification resolves its marker at load
                    raise RuntimeError(f"format {fmt!r} needs a step marker token")
                ids.append(marker)
                positions.append(len(ids) - 1)
                if fmt == "step_tag" and k < len(steps) - 1:
                    ids.extend(self.newline_ids)
            out.append(Encoded(ids, positions))
        return out

    def encode_responses(self, items: Sequence[tuple[str, str]]) -> list[Encoded]:
        """ORM inputs: the whole conversation, scored at its last token."""
        with self._encoding:
            return self._encode_responses(items)

    def _encode_responses(self, items: Sequence[tuple[str, str]]) -> list[Encoded]:
        frames = self._frames([p for p, _ in items])
        prefixes = self._prefix_ids([h for h, _ in frames])
        bodies = self._ids([r for _, r in items], plain_text=True)
        tails = self._ids([t for _, t in frames], plain_text=False) if self.chat else [[] for _ in items]
        out = []
        for prefix, body, tail in zip(prefixes, bodies, tails):
            ids = [*prefix, *body, *tail]
            out.append(Encoded(ids, [len(ids) - 1]))
        return out
