"""Reading judge output: strict JSON first, then a tolerant fallback (JSON inside prose or code fences, then
labelled lines). What cannot be read raises ``JudgeParseError`` so the item becomes ``error``, never a 0."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from verifiers.types import VerifierFailed

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_YES = {"yes", "y", "true", "correct", "equivalent", "pass", "met", "1"}
_NO = {"no", "n", "false", "incorrect", "wrong", "not equivalent", "fail", "not met", "unmet", "0"}

Method = Literal["json", "embedded_json", "text"]


class JudgeParseError(VerifierFailed, ValueError):
    """A judge output that does not follow the format asked for: the check failed, never a "no"."""


def without_thinking(text: str) -> str:
    """The output with any <think> block removed (reasoning models put their scratch work there)."""
    return _THINK_RE.sub("", text)


def _objects_in(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in text, in order."""
    found, decoder, i = [], json.JSONDecoder(), 0
    while (start := text.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            i = start + 1
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = end
    return found


def json_object(text: str, wanted_key: str) -> tuple[dict[str, Any], Method] | None:
    """The judge's JSON answer: the whole output, else the last embedded object holding ``wanted_key``."""
    body = _THINK_RE.sub("", text).strip()
    try:
        obj = json.loads(body)
        if isinstance(obj, dict) and wanted_key in obj:
            return obj, "json"
    except json.JSONDecodeError:
        pass
    candidates = [o for o in _objects_in(body) if wanted_key in o]
    return (candidates[-1], "embedded_json") if candidates else None


def _truth(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().strip(".*'\"` ").lower()
        if v in _YES:
            return True
        if v in _NO:
            return False
    return None


def _last_label(text: str, labels: Sequence[str], values: str) -> str | None:
    pattern = rf"(?:{'|'.join(labels)})\s*[:=\-]\s*[*_`\"']*\s*({values})\b"
    hits = re.findall(pattern, text, re.IGNORECASE)
    return hits[-1] if hits else None


@dataclass
class Binary:
    value: bool
    reason: str
    method: Method


def parse_verdict(text: str) -> Binary:
    found = json_object(text, "verdict")
    if found:
        obj, method = found
        value = _truth(obj["verdict"])
        if value is None:
            raise JudgeParseError(f"verdict {obj['verdict']!r} is neither yes nor no")
        return Binary(value, str(obj.get("reason", ""))[:500], method)
    body = _THINK_RE.sub("", text)
    label = _last_label(body, ["verdict", "final verdict", "answer", "judgement", "judgment"],
                        "yes|no|correct|incorrect|true|false")
    if label is None:
        last = [ln.strip(" *.`'\"#:").lower() for ln in body.strip().splitlines() if ln.strip()]
        label = last[-1] if last and last[-1] in ("yes", "no", "correct", "incorrect") else None
    if label is None:
        raise JudgeParseError(f"no verdict in judge output: {text[:200]!r}")
    return Binary(bool(_truth(label)), "", "text")


@dataclass
class CriterionMark:
    met: bool
    evidence: str


def parse_criteria(text: str, ids: Sequence[str]) -> tuple[dict[str, CriterionMark], Method]:
    """One mark per criterion id; a missing id makes the whole output unusable."""
    found = json_object(text, "criteria")
    marks: dict[str, CriterionMark] = {}
    method: Method = "text"
    if found:
        obj, method = found
        entries = obj["criteria"]
        if isinstance(entries, dict):  # {"c1": true} or {"c1": {"met": true}}
            entries = [{"id": k, **(v if isinstance(v, dict) else {"met": v})} for k, v in entries.items()]
        if not isinstance(entries, list):
            raise JudgeParseError("'criteria' is neither a list nor an object")
        for entry in entries:
            if not isinstance(entry, dict) or "id" not in entry:
                continue
            met = _truth(entry.get("met", entry.get("verdict")))
            if met is not None:
                marks[str(entry["id"])] = CriterionMark(met, str(entry.get("evidence") or "")[:500])
    else:
        body = _THINK_RE.sub("", text)
        for cid in ids:
            label = _last_label(body, [re.escape(cid)], "yes|no|met|not met|unmet|true|false|pass|fail")
            if label is not None:
                marks[cid] = CriterionMark(bool(_truth(label)), "")
    missing = [cid for cid in ids if cid not in marks]
    if missing:
        raise JudgeParseError(f"judge output has no usable mark for criteria {missing[:10]}: {text[:200]!r}")
    return {cid: marks[cid] for cid in ids}, method


Winner = Literal["A", "B", "tie"]
_WINNERS: dict[str, Winner] = {"a": "A", "b": "B", "tie": "tie"}


def parse_winner(text: str) -> tuple[Winner, Method]:
    found = json_object(text, "winner")
    if found:
        raw, method = str(found[0]["winner"]), found[1]
    else:
        label = _last_label(_THINK_RE.sub("", text), ["winner", "better response", "verdict"],
                            r"A|B|tie|\[\[A\]\]|\[\[B\]\]")
        if label is None:
            raise JudgeParseError(f"no winner in judge output: {text[:200]!r}")
        raw, method = label, "text"
    value = raw.strip().strip("[]()*'\" .").lower()
    value = {"response a": "a", "response b": "b", "draw": "tie", "equal": "tie"}.get(value, value)
    if value not in ("a", "b", "tie"):
        raise JudgeParseError(f"winner {raw!r} is not A, B or tie")
    return _WINNERS[value], method
