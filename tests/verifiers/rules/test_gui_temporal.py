"""gui_action and temporal_grounding on outputs written the way GUI and video-grounding models write them."""
from __future__ import annotations

import pytest

from verifiers.kinds.rules.gui import GuiActionVerifier
from verifiers.kinds.rules.temporal import TemporalGroundingVerifier
from verifiers.types import InvalidReference

GUI, TG = GuiActionVerifier(), TemporalGroundingVerifier()
SEARCH = {"action": "click", "box": [480, 1100, 600, 1220], "image_size": [1080, 2400]}


@pytest.mark.parametrize("response, options", [
    # UI-R1: reasoning, then a Python-literal list with one action.
    ("<think>The search icon is at the top right.</think><answer>[{'action': 'click', 'coordinate': [540, 1160]}]"
     "</answer>", {}),
    # GUI-R1: point plus a placeholder input text.
    ("<think>tap search</think><answer>[{'action': 'click', 'point': [540, 1160], 'input_text': 'no input text'}]"
     "</answer>", {}),
    # AndroidControl-style JSON.
    ('{"action_type": "click", "x": 540, "y": 1160}', {}),
    # UI-TARS call text with a start box, and with box tokens.
    ("Thought: open the search.\nAction: click(start_box='(540,1160)')", {}),
    ("Action: click(start_box='<|box_start|>(500,483)<|box_end|>')", {"coords": "0-1000"}),
    # A bare call with keyword coordinates, and a tap synonym.
    ("tap(x=540, y=1160)", {}),
    ('```json\n{"action": "left_click", "coordinate": [0.5, 0.4833]}\n```', {"coords": "0-1"}),
])
def test_click_formats(response: str, options: dict) -> None:
    v = GUI.check(response, SEARCH, GUI.Options(**options))
    assert (v.status.value, v.score) == ("ok", 1.0), v
    assert v.details["components"] == {"type": 1.0, "target": 1.0}


@pytest.mark.parametrize("response, reference, components", [
    ("type(content='weather in Paris')", {"action": "type", "text": "Weather in Paris"}, {"type": 1.0, "text": 1.0}),
    ("[{'action': 'type', 'point': [0, 0], 'input_text': 'weather'}]", {"action": "type", "text": "weather in Paris"},
     {"type": 1.0, "text": 0.0}),
    ('{"action_type": "scroll", "direction": "down"}', {"action": "scroll", "direction": "down"},
     {"type": 1.0, "direction": 1.0}),
    ("scroll(start_box='(500,500)', direction='up')", {"action": "scroll", "direction": "down"},
     {"type": 1.0, "direction": 0.0}),
    ("open_app(app_name='Google Maps')", {"action": "open_app", "app": "google maps"}, {"type": 1.0, "app": 1.0}),
    ("press_back()", {"action": "navigate_back"}, {"type": 1.0}),
    ("press_home()", {"action": "navigate_back"}, {"type": 0.0}),
    ('{"action_type": "wait"}', {"action": "wait"}, {"type": 1.0}),
    ("finished(content='done')", {"action": "finish"}, {"type": 1.0}),
    ('{"action": "click", "element_id": 12}', {"action": "click", "element_id": 12}, {"type": 1.0, "target": 1.0}),
    ("long_press(x=540, y=1160)", SEARCH, {"type": 0.0, "target": 0.0}),
])
def test_components(response: str, reference: dict, components: dict) -> None:
    v = GUI.check(response, reference, GUI.Options())
    assert v.details["components"] == components, v
    assert v.score == float(all(c == 1.0 for c in components.values()))
    partial = GUI.check(response, reference, GUI.Options(partial=True))
    assert partial.score == pytest.approx(sum(components.values()) / len(components))


def test_typed_text_by_token_f1() -> None:
    v = GUI.check("type(content='weather Paris today')", {"action": "type", "text": "weather in Paris"},
                  GUI.Options(text_match="f1"))
    assert v.score == 1.0


@pytest.mark.parametrize("response, status", [
    ("click(x=540, y=1160)\nclick(x=100, y=100)", "rejected"),  # a hedge over two targets
    ("[{'action': 'click', 'coordinate': [540, 1160]}, {'action': 'type', 'text': 'a'}]", "rejected"),
    ("I will click the search icon.", "no_answer"),
    ("__import__('os').system('id')", "no_answer"),  # call text is never evaluated
    ("click(x=__import__('os').getpid(), y=1)", "no_answer"),
    ("", "no_answer"),
])
def test_hedges_garbage_and_hostile_text(response: str, status: str) -> None:
    v = GUI.check(response, SEARCH, GUI.Options())
    assert v.status.value == status and v.score == 0.0, v


def test_bad_gui_reference() -> None:
    for bad in ({"action": "fly"}, {"action": "click", "box": [5, 5, 1, 1]}, "click",
                {"action": "scroll", "direction": "sideways"}):
        with pytest.raises(InvalidReference):
            GUI.check("click(x=1, y=1)", bad, GUI.Options())


@pytest.mark.parametrize("response, score", [
    ("The event happens from 12.5s to 18 s.", pytest.approx(5.5 / 6)),
    ("<answer>[12.0, 18.0]</answer>", 1.0),
    ('{"start": 12, "end": 18}', 1.0),
    ('```json\n{"timestamp": ["00:12", "00:18"]}\n```', 1.0),
    ("<think>maybe 0 - 5</think><answer>12 - 18 seconds</answer>", 1.0),
    ("It starts at 00:00:15 and ends at 00:00:21", pytest.approx(3 / 9)),
    ("[30, 40]", 0.0),
])
def test_temporal_formats(response: str, score: object) -> None:
    v = TG.check(response, [12, 18], TG.Options())
    assert v.status.value == "ok" and v.score == score, v


@pytest.mark.parametrize("response, reason", [
    ("[0, 300]", "covers most of the video"),
    ("[10, 20] or maybe [50, 60]", "several different segments"),
    ("[20, 10]", "ends before it starts"),
    ("[250, 400]", "outside"),
])
def test_temporal_guards(response: str, reason: str) -> None:
    v = TG.check(response, {"segment": [12, 18], "duration": 300}, TG.Options())
    assert v.status.value == "rejected" and reason in v.reason, v


def test_temporal_threshold_and_bad_reference() -> None:
    assert TG.check("[12, 17]", [12, 18], TG.Options(threshold=0.5)).score == 1.0
    assert TG.check("[17, 30]", [12, 18], TG.Options(threshold=0.5)).score == 0.0
    with pytest.raises(InvalidReference):
        TG.check("[1, 2]", [5, 1], TG.Options())
