"""Rule-based checks run before any judge call: answers that are empty, only filler that fools judges ("Thought
process:", "Solution", ":"), markup or noise, hedged between several answers, or over-long are refused for free;
text aimed at the judge is stripped (or refused) before the response is quoted."""
from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from verifiers.conversation import content_text, tool_call_parts
from verifiers.kinds.math.extract import answer_like, boxed_contents, final_statements

# Phrases that carry no answer; a response made only of them (plus punctuation/markup) is a judge-hacking attempt.
# Case-insensitive, matched as whole phrases. Kept general: openers, section headers, and the "master keys" of
# "One Token to Fool LLM-as-a-Judge" in several languages.
_FILLER = [
    r"thought\s+process", r"thinking", r"reasoning(?:\s+process)?", r"let'?s\s+think(?:\s+about\s+(?:it|this))?",
    r"let'?s\s+(?:solve|tackle|work\s+through|break\s+down|analy[sz]e|approach)\s+(?:this|the|it)"
    r"(?:\s+(?:problem|question|task))?(?:\s+step[\s-]+by[\s-]+step)?",
    r"let\s+me\s+(?:think|solve|work|check)(?:\s+(?:this|it)(?:\s+out)?)?(?:\s+step[\s-]+by[\s-]+step)?",
    r"step[\s-]+by[\s-]+step", r"step\s*\d*", r"solution", r"answer", r"final\s+answer", r"the\s+answer\s+is",
    r"explanation", r"therefore", r"thus", r"hence", r"okay", r"sure", r"certainly", r"of\s+course", r"hmm+",
    r"alright", r"here(?:'s|\s+is)\s+(?:the|my)\s+(?:solution|answer|reasoning)",
    r"i\s+(?:will|'ll)\s+solve\s+(?:this|it)", r"(?:the\s+)?answer\s+is\s+(?:correct|right)",
    r"解答", r"答案", r"解析", r"解", r"思考过程", r"かいせつ", r"解説", r"答え", r"解決策", r"풀이", r"해설",
    r"solución", r"respuesta", r"lösung", r"antwort", r"réponse",
]
_FILLER_RE = re.compile(r"(?<!\w)(?:" + "|".join(_FILLER) + r")(?!\w)", re.IGNORECASE)
_MARKUP_RE = re.compile(r"<[^<>]{0,200}>|&[a-z]+;|&#\d+;|\\(?:boxed|text|mathrm|textbf)\s*\{\s*\}")
_ZERO_WIDTH_RE = re.compile(r"[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")

# Text that addresses the judge rather than the task.
_INJECTION = [
    r"(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+|these\s+|those\s+)*"
    r"(?:previous\s+|prior\s+|above\s+|earlier\s+|preceding\s+|other\s+|grading\s+|original\s+)*"
    r"(?:instructions?|rubric|rules|prompt|criteria|guidelines|reference(?:\s+answer)?|context)",
    r"(?:answer|respond|reply|output)\s+(?:(?:with|only|just)\s+)*[\"'`]?(?:yes|correct|true|pass|met)(?![\w])",
    r"(?:you\s+are|act\s+as|as)\s+(?:the|a|an)\s+(?:grader|judge|evaluator|reviewer|assessor)",
    r"(?:to|dear|attention|note\s+(?:to|for))\s+(?:the\s+)?(?:grader|judge|evaluator|reviewer|ai\s+judge)",
    r"(?:grade|score|rate|mark|judge|evaluate)\s+(?:this|the|my)\s+(?:response|answer|solution|output)\s+"
    r"(?:as\s+)?(?:correct|right|10|full|perfect|highly|a\s+pass|met)",
    r"(?:this|the|my)\s+(?:response|answer|solution)\s+(?:is|must\s+be|should\s+be)\s+"
    r"(?:graded|marked|scored|judged|considered)\s+(?:as\s+)?(?:correct|right|a\s+pass)",
    r"\"(?:verdict|winner|met|criteria|score)\"\s*:",
    r"<\|?/?(?:im_start|im_end|system|assistant|user|endoftext|eot_id|start_header_id)\|?>",
    r"(?:new|updated|system)\s+(?:instructions?|prompt)\s*:",
]
_INJECTION_RE = re.compile("|".join(f"(?:{p})" for p in _INJECTION), re.IGNORECASE)
_SENTENCE_RE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")



@dataclass
class GuardResult:
    """What the guards decided: ``refusal`` set means reject with no call; ``text`` is what the judge will see."""

    text: str
    refusal: str | None = None
    code: str | None = None
    notes: dict[str, object] = field(default_factory=dict)


def boxed_answers(text: str) -> list[str]:
    """Contents of every closed \\boxed{...} / \\fbox{...}, nested braces kept, in order (the math core's reader: one
    pass with a brace stack, since this runs on the event loop and a flood of unclosed boxes must stay linear)."""
    return boxed_contents(text)


def final_answers(text: str) -> list[str]:
    """Distinct final answers the response commits to, read by the math answer core (``final_statements``): boxes,
    "####", "the answer is", bold answers; a retraction withdraws what came before it."""
    return final_statements(text)


def hedged(text: str) -> list[str] | None:
    """The competing answers when the response commits to more than one value, else None. Only value-like answers
    compete (a number, math, one word): "the answer is to call or write" is a sentence, not two answers."""
    values = [a for a in final_answers(text) if answer_like(a)]
    return values if len(values) > 1 else None


def strip_injection(text: str) -> tuple[str, list[str]]:
    """Drop each sentence holding text aimed at the judge; return the rest and what was dropped."""
    dropped: list[str] = []

    def drop(match: re.Match[str]) -> str:
        sentence = match.group(0)
        if _INJECTION_RE.search(sentence):
            dropped.append(sentence.strip()[:200])
            return "\n" if sentence.endswith("\n") else " "
        return sentence

    cleaned = _SENTENCE_RE.sub(drop, text)
    return (cleaned.strip() if dropped else text), dropped


def _content_left(text: str) -> str:
    """Letters and digits left once markup, filler phrases and everything else are removed."""
    text = _FILLER_RE.sub(" ", _MARKUP_RE.sub(" ", _ZERO_WIDTH_RE.sub("", text)))
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


def _noise(text: str) -> str | None:
    """Gibberish tests that hold across languages: degenerate repetition, symbol soup, vowel-less Latin words."""
    compact = text.strip()
    if len(compact) >= 200 and len(zlib.compress(compact.encode())) / len(compact.encode()) < 0.08:
        return "degenerate repetition"
    visible = [ch for ch in compact if not ch.isspace()]
    if len(visible) >= 24:
        alnum = sum(unicodedata.category(ch)[0] in "LN" for ch in visible)
        if alnum / len(visible) < 0.25:
            return "mostly symbols"
    words = re.findall(r"\b[a-zA-Z]{4,}\b", compact)
    if len(words) >= 8 and sum(bool(re.search(r"[aeiouyAEIOUY]", w)) for w in words) / len(words) < 0.5:
        return "random letters"
    return None


def check_response(
    text: str,
    *,
    max_chars: int,
    injection: str = "strip",
    check_hedging: bool = True,
    require_final_answer: bool = False,
) -> GuardResult:
    """Run every guard; ``injection`` is "strip" (drop judge-directed sentences), "reject", or "keep"."""
    if len(text) > max_chars:
        return GuardResult(text, f"response has {len(text)} characters, over the judge limit of {max_chars}",
                           "too_long")
    notes: dict[str, object] = {}
    if injection != "keep":
        cleaned, dropped = strip_injection(text)
        if dropped:
            notes["injection"] = dropped
            if injection == "reject":
                return GuardResult(text, "response addresses the judge (prompt injection)", "injection", notes)
            text = cleaned
    if not _ZERO_WIDTH_RE.sub("", text).strip():
        if notes:
            return GuardResult(text, "response is only text aimed at the judge", "injection_only", notes)
        return GuardResult(text, "empty response", "empty", notes)
    if not _content_left(text):
        stripped = _ZERO_WIDTH_RE.sub("", text)
        if _FILLER_RE.search(stripped):
            code, why = "hacking_only", "response is only filler phrases that carry no answer"
        elif _MARKUP_RE.search(stripped):
            code, why = "markup_only", "response is only markup"
        else:
            code, why = "near_empty", "response holds no letters or digits"
        return GuardResult(text, why, code, notes)
    noise = _noise(text)
    if noise:
        return GuardResult(text, f"response looks like noise ({noise})", "gibberish", notes)
    if check_hedging:
        competing = hedged(text)
        if competing:
            return GuardResult(text, f"response hedges between several final answers: {competing[:5]}", "hedged",
                               {**notes, "answers": competing[:5]})
    if require_final_answer and not final_answers(text):
        return GuardResult(text, "no final answer stated (\\boxed{} or 'the answer is')", "no_final_answer", notes)
    return GuardResult(text, None, None, notes)


def guard_turns(messages: list[dict[str, Any]], final_text: str, injection: str) -> tuple[list[dict[str, Any]],
                                                                                          list[str]]:
    """Copies of a conversation's messages with text aimed at the judge dropped from every part the model wrote or
    could steer (assistant text, tool-call arguments, tool results: a tool may echo what the model sent it), and the
    final assistant turn's text replaced by ``final_text`` (already through ``check_response``). Returns the copies
    and what was dropped; ``injection`` "keep" changes nothing but the final text."""
    dropped: list[str] = []

    def clean(text: str) -> str:
        if injection == "keep":
            return text
        cleaned, gone = strip_injection(text)
        dropped.extend(gone)
        return cleaned

    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    out = []
    for i, message in enumerate(messages):
        message = dict(message)
        if i == last:
            message["content"] = final_text
        elif message.get("role") in ("assistant", "tool"):
            message["content"] = clean(content_text(message.get("content")))
        if message.get("tool_calls"):
            message["tool_calls"] = [_clean_call(call, clean) for call in message["tool_calls"]]
        out.append(message)
    return out, dropped


def _clean_call(call: dict[str, Any], clean: Callable[[str], str]) -> dict[str, Any]:
    name, arguments = tool_call_parts(call)
    return {**call, "function": {"name": clean(name), "arguments": clean(arguments)}}
