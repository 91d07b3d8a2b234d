"""Guards that run on the event loop must stay linear: a hostile response must not stall the server."""
from __future__ import annotations

import random
import re

from verifiers.kinds.judges.guards import boxed_answers, check_response


def boxed_by_rescanning(text: str) -> list[str]:
    """Brute-force reference: from every opening, count braces to its close."""
    found = []
    for match in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            found.append(text[match.end(): i - 1])
    return found


def test_boxed_answers_matches_the_brute_force_reference() -> None:
    rng = random.Random(0)
    alphabet = ["\\boxed{", "\\fbox {", "{", "}", "a", "1", " ", "\\boxed {"]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert boxed_answers(text) == boxed_by_rescanning(text), text
    assert boxed_answers("x \\boxed{\\frac{1}{2}} and \\fbox{3}") == ["\\frac{1}{2}", "3"]


def test_unclosed_box_flood_is_handled() -> None:
    flood = "\\boxed{" * 2800  # ~20k characters: the default judge limit
    assert boxed_answers(flood) == []
    result = check_response(flood + " 42", max_chars=20_000)
    assert result.code == "gibberish"  # refused as degenerate repetition, without a judge call


def test_code_fence_scan_is_linear_and_unchanged() -> None:
    """Possessive fence patterns find exactly what the backtracking ones found, and floods do not hang."""
    from verifiers.kinds.code import extract

    old_fence = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\s`{]*)[^\n]*\n", re.M)

    def old_blocks(text: str) -> list[tuple[str, str]]:
        blocks, pos = [], 0
        while (opening := old_fence.search(text, pos)) is not None:
            fence, tag = opening.group(1), opening.group(2).lower()
            closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
            end = closing.search(text, opening.end())
            blocks.append((tag, text[opening.end(): end.start() if end else len(text)]))
            if end is None:
                break
            pos = end.end()
        return blocks

    rng = random.Random(1)
    alphabet = ["```", "````", "~~~", "python", "py", " ", "\t", "\n", "x = 1", "`", "{"]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        assert extract.fenced_blocks(text) == old_blocks(text), text
    for flood in ("`" * 200_000, "```" + " " * 200_000, "```python\n" * 20_000):
        extract.extract_program(flood)


def test_final_answer_reading_is_linear_on_floods() -> None:
    """The math answer core reads "the final answer" for the judges' hedging guard on the event loop: floods of
    its markers (about 200k characters each; a quadratic reading of any of them takes minutes) are read, and read
    as what they are."""
    from verifiers.kinds.judges.guards import hedged
    from verifiers.kinds.math.extract import extract, final_statements

    floods = {
        "answer:" + "\n" * 200_000: [],
        "the answer is " * 15_000: None,
        "#### 5\n" * 30_000: ["5"],
        "the answer is 1 or " * 10_000 + "2": None,
        "\\boxed{" * 28_000: [],
        "$" * 200_000: [],
        "$1 " * 70_000: [],
        "\\(" * 100_000: [],
        "could be " * 20_000: [],
        "\\boxed{1} wait " * 13_000: ["1"],
        "Question: what is x\n" * 10_000: [],  # every turn marker once re-read the whole text before it
    }
    for text, expected in floods.items():
        found = final_statements(text)
        if expected is not None:
            assert found == expected, text[:40]
        extract(text)
    assert hedged("the answer is 1 or " * 10_000 + "2") == ["1", "2"]
