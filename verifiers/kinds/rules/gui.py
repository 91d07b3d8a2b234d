"""``gui_action``: one GUI-agent action read from the answer, scored by components (type, target, text, direction,
app) so a spec can weight them as UI-R1 and GUI-R1 do.

Read as agents write actions: JSON or Python-literal objects (``{"action": "click", "coordinate": [x, y]}`` of UI-R1,
``[{'action': 'click', 'point': [x, y], 'input_text': ...}]`` of GUI-R1, AndroidControl's ``{"action_type": ...}``)
and function-call text (``click(x=1, y=2)``, UI-TARS's ``click(start_box='(x,y)')``, ``type(content='...')``,
``press_back()``, ``finished()``). Call text is parsed with ``ast`` and only literal arguments are read: nothing in the
answer is evaluated. Several different actions for one step are a hedge and are refused.
"""
from __future__ import annotations

import ast
import re
from typing import Any, Literal

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.kinds.rules.answer import answer_text, structured_values
from verifiers.kinds.rules.boxes import Coords, inside, read_points, scale, value_boxes
from verifiers.kinds.rules.qa import normalize_answer, token_f1
from verifiers.types import InvalidReference, Verdict

ACTIONS = {
    "click": ("click", "tap", "left_click", "left_single", "single_click", "touch", "select"),
    "long_press": ("long_press", "long_click", "long_tap", "press_and_hold"),
    "type": ("type", "input", "input_text", "type_text", "enter_text", "write", "set_text"),
    "scroll": ("scroll", "scroll_up", "scroll_down", "scroll_left", "scroll_right"),
    "swipe": ("swipe", "drag", "fling"),
    "open_app": ("open_app", "open", "launch", "launch_app", "start_app", "awake"),
    "back": ("back", "navigate_back", "press_back", "go_back"),
    "home": ("home", "navigate_home", "press_home", "go_home"),
    "wait": ("wait", "sleep"),
    "finish": ("finish", "finished", "complete", "completed", "done", "terminate", "status", "stop", "answer"),
}
_CANON = {alias: name for name, aliases in ACTIONS.items() for alias in aliases}
_TYPE_KEYS = ("action", "action_type", "type", "name", "function")
_TEXT_KEYS = ("text", "input_text", "content", "value", "typed_text")
_APP_KEYS = ("app", "app_name", "application", "package")
_ELEMENT_KEYS = ("element_id", "element", "index", "id", "target_id")
_CALL = re.compile(r"\b([A-Za-z_]\w{0,40})\s*\(", re.DOTALL)
_DIRECTIONS = ("up", "down", "left", "right")
_NO_TEXT = {"", "no input text", "none", "null", "n/a"}


def canon(name: Any) -> str | None:
    return _CANON.get(str(name).strip().lower().replace(" ", "_").replace("-", "_"))


def _calls(text: str) -> list[dict[str, Any]]:
    """Function-call actions in the text, each as a dict of its literal arguments (never evaluated)."""
    out: list[dict[str, Any]] = []
    for m in _CALL.finditer(text):
        name = canon(m.group(1))
        if name is None:
            continue
        depth, end = 0, None
        for i in range(m.end() - 1, min(len(text), m.end() + 4000)):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                end = i + 1
                break
        if end is None:
            continue
        try:
            node = ast.parse(text[m.start():end].strip(), mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        if not isinstance(node, ast.Call):
            continue
        action: dict[str, Any] = {"action": m.group(1)}
        try:
            for kw in node.keywords:
                if kw.arg:
                    action[kw.arg] = ast.literal_eval(kw.value)
            if node.args:
                action["_args"] = [ast.literal_eval(a) for a in node.args]
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        out.append(action)
        if len(out) >= 50:
            break
    return out


def _dicts(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value] if any(k in value for k in _TYPE_KEYS) else []
    if isinstance(value, list):
        return [v for v in value[:50] if isinstance(v, dict) and any(k in v for k in _TYPE_KEYS)]
    return []


def read_actions(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for value in structured_values(text):
        found.extend(_dicts(value))
    return found or _calls(text)


def _first(action: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in action and action[key] is not None:
            return action[key]
    return None


def describe(action: dict[str, Any]) -> dict[str, Any]:
    """The action's type and the parameters every component reads."""
    raw_type = _first(action, _TYPE_KEYS)
    kind = canon(raw_type) if raw_type is not None else None
    direction = action.get("direction")
    if direction is None and kind == "scroll" and str(raw_type).lower().startswith("scroll_"):
        direction = str(raw_type).lower().removeprefix("scroll_")
    args = action.get("_args") or []
    text = _first(action, _TEXT_KEYS)
    if text is None and kind == "type" and args and isinstance(args[0], str):
        text = args[0]
    app = _first(action, _APP_KEYS)
    if app is None and kind == "open_app" and args and isinstance(args[0], str):
        app = args[0]
    point = None
    blob = {k: v for k, v in action.items() if k not in _TYPE_KEYS + _TEXT_KEYS + _APP_KEYS + ("direction",)}
    if "x" in action and "y" in action:
        point = read_points(repr([action["x"], action["y"]]))
    elif blob:
        point = read_points(repr(blob)) or read_points(" ".join(str(v) for v in blob.values()))
    element = _first(action, _ELEMENT_KEYS)
    return {"type": kind, "raw_type": raw_type, "point": point[0] if point else None, "text": text, "app": app,
            "direction": str(direction).strip().lower() if direction is not None else None,
            "element": element}


class GuiActionOptions(BaseOptions):
    coords: Coords = Field("pixel", description="The response's convention: pixel, 0-1 or the 0-1000 grid.")
    partial: bool = Field(False, description="Score the mean of the components instead of requiring all of them.")
    text_match: Literal["exact", "f1"] = Field("exact", description="Typed text: normalised equality, or token F1.")
    text_f1_threshold: float = Field(0.5, ge=0, le=1, description="Token F1 at which typed text counts (f1).")


class GuiActionVerifier(Verifier[GuiActionOptions]):
    name = "gui_action"
    description = ("One GUI action (click, long press, type, scroll, swipe, open app, back, home, wait, finish) read "
                   "from JSON or call text; components for type, target, text, direction and app.")
    Options = GuiActionOptions
    binary = False
    inline_max_chars = 20_000

    def check(self, response: str, reference: Any, options: GuiActionOptions) -> Verdict:
        ref = _reference(reference)
        actions = [describe(a) for a in read_actions(answer_text(response))]
        actions = [a for a in actions if a["type"] is not None]
        if not actions:
            return Verdict.no_answer("no action found in the answer")
        distinct = {repr((a["type"], a["point"], a["text"], a["direction"], a["app"], a["element"])) for a in actions}
        if len(distinct) > 1:
            return Verdict.rejected(f"{len(distinct)} different actions for one step",
                                    actions=[str(a["raw_type"]) for a in actions[:20]])
        got = actions[0]
        components: dict[str, float] = {"type": float(got["type"] == ref["type"])}
        if ref.get("box") is not None or ref.get("element") is not None:
            components["target"] = self._target(got, ref, options) if components["type"] else 0.0
        if ref.get("text") is not None:
            components["text"] = self._text(got["text"], ref["text"], options) if components["type"] else 0.0
        if ref.get("direction") is not None:
            components["direction"] = float(components["type"] > 0 and got["direction"] == ref["direction"])
        if ref.get("app") is not None:
            components["app"] = float(components["type"] > 0 and got["app"] is not None
                                      and normalize_answer(str(got["app"])) == normalize_answer(str(ref["app"])))
        values = list(components.values())
        score = sum(values) / len(values) if options.partial else float(all(v == 1.0 for v in values))
        missed = [k for k, v in components.items() if v < 1.0]
        reason = "action matches" if not missed else f"wrong {', '.join(missed)}"
        return Verdict.ok(score, reason, components=components, action=got["type"],
                          point=list(got["point"]) if got["point"] else None)

    @staticmethod
    def _target(got: dict[str, Any], ref: dict[str, Any], options: GuiActionOptions) -> float:
        if ref.get("element") is not None and got["element"] is not None:
            return float(str(got["element"]).strip() == str(ref["element"]).strip())
        if ref.get("box") is None or got["point"] is None:
            return 0.0
        try:
            fx, fy = scale(options.coords, ref.get("image_size"))
        except ValueError as exc:
            raise InvalidReference(str(exc)) from None
        x, y = got["point"]
        return float(inside((x * fx, y * fy), ref["box"]))

    @staticmethod
    def _text(got: Any, want: str, options: GuiActionOptions) -> float:
        if got is None or normalize_answer(str(got)) in _NO_TEXT:
            return 0.0
        if options.text_match == "f1":
            return float(token_f1(str(got), want) >= options.text_f1_threshold)
        return float(normalize_answer(str(got)) == normalize_answer(want))


def _reference(reference: Any) -> dict[str, Any]:
    if not isinstance(reference, dict) or canon(reference.get("action", "")) is None:
        known = ", ".join(ACTIONS)
        raise InvalidReference(f'reference must be {{"action": ..., ...}} with an action among {known}')
    ref: dict[str, Any] = {"type": canon(reference["action"])}
    if reference.get("box") is not None:
        boxes = value_boxes(reference["box"])
        if len(boxes) != 1 or boxes[0].box[2] <= boxes[0].box[0] or boxes[0].box[3] <= boxes[0].box[1]:
            raise InvalidReference("reference.box must be [x1, y1, x2, y2] with x2 > x1 and y2 > y1")
        ref["box"] = boxes[0].box
    elif reference.get("point") is not None:
        # A point target with a tolerance radius in pixels is a small box around it.
        pt = reference["point"]
        radius = float(reference.get("radius", 14))
        if not (isinstance(pt, list) and len(pt) == 2):
            raise InvalidReference("reference.point must be [x, y]")
        ref["box"] = (pt[0] - radius, pt[1] - radius, pt[0] + radius, pt[1] + radius)
    size = reference.get("image_size")
    ref["image_size"] = (float(size[0]), float(size[1])) if isinstance(size, list) and len(size) == 2 else None
    ref["element"] = reference.get("element_id")
    ref["text"] = reference.get("text")
    direction = reference.get("direction")
    if direction is not None and str(direction).lower() not in _DIRECTIONS:
        raise InvalidReference(f"reference.direction must be one of {', '.join(_DIRECTIONS)}")
    ref["direction"] = str(direction).lower() if direction is not None else None
    ref["app"] = reference.get("app", reference.get("app_name"))
    return ref


