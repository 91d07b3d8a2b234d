"""Where the response's own text is: after its reasoning (``</think>``), and before the point where a generation runs
on past its own turn (a chat template's end token, the next user turn, a base model's next few-shot question)."""
from __future__ import annotations

import re
from collections.abc import Callable

_THINK_END = "</think>"


def final_section(text: str) -> str:
    """Text after a closing ``</think>`` when there is something there: reasoning is not the answer."""
    if _THINK_END in text:
        after = text.rsplit(_THINK_END, 1)[1]
        if after.strip():
            return after
    return text


# Where a generation runs past its own turn: a chat template's special token (a server that did not stop on it:
# <|im_end|>, <|eot_id|>, <|end|>, <|END_OF_TURN_TOKEN|>, DeepSeek's full-width <｜end▁of▁sentence｜>, Gemma's
# <end_of_turn>, Mistral's </s> and [INST]), a chat role's next line ("User: …"), or a base model's next few-shot turn
# ("Question: …", "Q: …") after it has answered. A special token names at least three letters, so ``<|x|>`` in
# math is never one.
_END_OF_TEXT = re.compile(  # a literal first character, so the scan skips ahead in C
    r"<(?:[|\uff5c](?=[^|\uff5c<>\n]{0,40}?[A-Za-z]{3})[A-Za-z\u2581][\w\u2581 ]{1,39}[|\uff5c]>"
    r"|/s>|(?:end|start)_of_turn>)"
)
_INST = re.compile(r"\[/?INST\]")
_ROLE = re.compile(r"^[ \t]*(?:Human|User|USER|Assistant|ASSISTANT|assistant|user|model|system)[ \t]*$")
_CHAT_TURN = re.compile(r"^[ \t]*(?:Human|User)[ \t]*[:：]", re.MULTILINE)
_NEXT_TURN = re.compile(r"^[ \t]*(?:#+[ \t]*)?(?:Question|Q|Problem|Instruction|Input)[ \t]*\d*[ \t]*[:：]",
                        re.MULTILINE | re.IGNORECASE)


def _before_turn_end(section: str) -> str:
    """The text before the first special token that follows some of the response's own text (tokens and role
    names before it, "<|im_start|>assistant", are the template's opening, not an answer)."""
    last = 0
    tokens = _END_OF_TEXT.finditer(section) if "<" in section else iter(())
    for m in sorted([*tokens, *_INST.finditer(section)], key=lambda t: t.start()) if "[" in section else tokens:
        if not _ROLE.match(section[last:m.start()]) and section[last:m.start()].strip():
            return section[:m.start()]
        last = m.end()
    return section


def own_turn(section: str, states_answer: Callable[[str], bool]) -> str:
    """The response to this prompt only: text after an end-of-text token, after a chat role's next turn ("User:")
    once the response has written any value, or after a new "Question:"/"Q:" turn that follows a stated answer,
    answers other questions (older base models keep writing few-shot examples)."""
    section = _before_turn_end(section)
    digit = re.search(r"\d", section) if "User" in section or "Human" in section else None
    turn = _CHAT_TURN.search(section, digit.end()) if digit else None
    if turn:
        section = section[:turn.start()]
    # The first turn marker with a stated answer before it. Whether a prefix states an answer only grows with the
    # prefix (every statement pattern is bounded by its line or its closing brace), so a binary search over the
    # markers finds the same one as trying each in turn, without re-reading ever longer prefixes (quadratic on a
    # flood of "Question:" lines).
    starts = [m.start() for m in _NEXT_TURN.finditer(section) if m.start()]
    lo, hi = 0, len(starts)
    while lo < hi:
        mid = (lo + hi) // 2
        if states_answer(section[:starts[mid]]):
            hi = mid
        else:
            lo = mid + 1
    return section[:starts[lo]] if lo < len(starts) else section
