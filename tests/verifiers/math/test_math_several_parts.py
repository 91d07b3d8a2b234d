"""Answers in several parts and boxes left open, on real MATH-500 solutions and on the texts models write: a box whose
brace never closes (a generation cut off, a gold copied without it) holds the rest of its text; a gold of several
boxes with a divider between them, or of several equations joined by words, is a several-part answer; "or"/"and"
glued to the values around them ("x=1orx=-1") are read as words. Each acceptance is paired with the rejections that
keep it from being a loophole: a prediction stays a hedge when it offers several values against one, an open box
followed by garbage states nothing, and equations must name the gold's quantity."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from verifiers.kinds.math.extract import box_statements, boxed_contents, extract
from verifiers.kinds.math.reference import reference_answer
from verifiers.kinds.math.verifier import MathVerifier
from verifiers.types import InvalidReference, Status, Verdict

V = MathVerifier()
OPTS = V.parse_options({})


def verdict(response: str, reference: object) -> Verdict:
    return V.check(response, reference, OPTS)


def score(response: str, reference: object) -> float | None:
    try:
        return V.check(response, reference, OPTS).score
    except InvalidReference:
        return None


@pytest.fixture(scope="module")
def math500(shared_data: Path) -> list[dict]:
    path = shared_data / "math" / "math500.test.jsonl"
    if not path.exists():
        pytest.skip("math500.test.jsonl is absent")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cut_in_last_box(solution: str) -> str | None:
    """The solution as a generation cut off before its last box closed: everything before the box's closing brace."""
    boxes = box_statements(solution, open_last=False)
    return solution[:boxes[-1].end - 1] if boxes else None


# --- a box left open at the end -----------------------------------------------------------------------------------

def test_a_solution_cut_off_inside_its_last_box_states_the_box(math500: list[dict]) -> None:
    """Every MATH-500 solution whose closed form scores 1 still scores 1 when its text stops before the last box's
    brace, bare or inside the "$...$" that closes around it; a wrong gold is still refused."""
    checked = 0
    for i, row in enumerate(math500):
        text = _cut_in_last_box(row["solution"])
        if text is None or score(row["solution"], row["answer"]) != 1.0:
            continue
        # the box really is open: a reader of closed boxes does not see it
        assert len(boxed_contents(text)) == len(boxed_contents(row["solution"])) - 1
        assert score(text, row["answer"]) == 1.0, (i, text[-120:])
        assert score(text + "$.", row["answer"]) == 1.0, (i, text[-120:])
        other = math500[(i + 7) % len(math500)]["answer"]
        if score(other, row["answer"]) == 0.0:
            assert score(text, other) == 0.0, (i, text[-120:], other)
        checked += 1
    assert checked > 400


def test_an_open_box_states_only_what_a_closed_box_would() -> None:
    # followed by garbage: the garbage is part of the box, which then states nothing
    assert verdict("So the answer is \\boxed{5 asdf qwer zxcv 5 5", "5").score == 0.0
    assert verdict("So the answer is \\boxed{5 asdf qwer zxcv 5 5", "5").status is Status.NO_ANSWER
    assert score("The total is \\boxed{5 + 7 = 13", "5") == 0.0
    # a blank line after it: the box was left behind, not cut off
    found = extract("We try \\boxed{5\n\nLet me reconsider the second case. The answer is 7.")
    assert found is not None and found.answers == ["7"]
    # an opener echoed from the instructions, with sentences after it, is no box
    echoed = verdict("I will put the final answer in \\boxed{ as the instructions say. The answer is 5.", "5")
    assert echoed.score == 1.0 and echoed.details["extraction"] == "answer_phrase"
    assert verdict("So the answer is \\boxed{5 apples. I hope this helps", "5").details["extraction"] != "boxed"
    # every candidate in an open box is a list, against one value a hedge
    listed = verdict("Possible totals: \\boxed{1, 2, 3, 4, 5, 6, 7, 8, 9, 10", "7")
    assert listed.score == 0.0 and listed.details["method"] == "hedging"
    # beside a closed box with another value: two answers
    both = verdict("First \\boxed{3}. Then, adding the last row, \\boxed{4", "4")
    assert both.score == 0.0 and both.details["method"] == "hedging"
    # after a retraction only the open box counts
    assert score("So \\boxed{3}. Wait, I miscounted the corners: \\boxed{4", "4") == 1.0
    assert score("So \\boxed{3}. Wait, I miscounted the corners: \\boxed{4", "3") == 0.0
    # a wrong value in an open box is wrong
    assert score("Thus the probability is \\boxed{\\frac{1}{3}", "\\frac{1}{2}") == 0.0
    # a body cut inside its own fraction cannot be read: no answer, never a reward
    assert verdict("Thus the probability is \\boxed{\\frac{1}{2", "\\frac{1}{2}").status is Status.NO_ANSWER


def test_a_gold_whose_box_never_closes_is_its_body() -> None:
    assert reference_answer("The probability is $\\boxed{\\frac{3}{8}$") == "\\frac{3}{8}"
    assert score("The probability is $\\frac{6}{16}$.", "\\boxed{\\frac{3}{8}") == 1.0
    assert score("The probability is $\\frac{5}{16}$.", "\\boxed{\\frac{3}{8}") == 0.0


def test_boxed_contents_reads_closed_boxes_only() -> None:
    """The judges' guards list closed boxes (a flood of unclosed openers stays empty)."""
    assert boxed_contents("\\boxed{3} and \\boxed{4") == ["3"]
    assert [b.text for b in box_statements("\\boxed{3} and \\boxed{4")] == ["3", "4"]
    assert boxed_contents("\\boxed{" * 2000) == [] and box_statements("\\boxed{" * 2000) == []


# --- a gold of several boxes with a divider between them -----------------------------------------------------------

@pytest.mark.parametrize("gold", [
    "$\\boxed{35} ++++++ \\boxed{4}$",
    "\\boxed{35} | \\boxed{4}",
    "\\boxed{35}\n\n---\n\n\\boxed{4}",
    "$\\\\boxed{35} ++++++ \\\\boxed{4}$",  # escaped twice, as copied test strings and data sets carry it
])
def test_a_gold_of_boxes_with_a_divider_is_a_several_part_answer(gold: str) -> None:
    for right in ("The two lengths are $35$ and $4$.", "$\\{4, 35\\}$", "${35,4}$", "\\boxed{35}, \\boxed{4}",
                  "So the answers are \\boxed{35} and \\boxed{4}."):
        assert score(right, gold) == 1.0, right
    every = "\\boxed{" + ", ".join(str(n) for n in range(1, 41)) + "}"  # every candidate listed
    for wrong in ("\\boxed{35}", "\\boxed{4}", "The answers are $35$, $4$ and $12$.", "$\\{35, 5\\}$", every):
        assert score(wrong, gold) == 0.0, wrong


def test_a_gold_of_boxes_keeps_its_units() -> None:
    gold = "$\\boxed{35 cm} ++++++ \\boxed{4}$"
    assert score("${35 cm,4}$", gold) == 1.0
    assert score("${36 cm,4}$", gold) == 0.0


def test_a_prediction_of_boxes_with_a_divider_is_still_a_hedge() -> None:
    """Predictions are read strictly: two boxes with different values are two answers, whatever stands between."""
    for response in ("So it is \\boxed{3} ++++++ \\boxed{4}", "\\boxed{3} | \\boxed{4}", "\\boxed{3} or \\boxed{4}",
                     "\\boxed{3}\n\n---\n\n\\boxed{4}"):
        v = verdict(response, "4")
        assert v.score == 0.0 and v.details["method"] == "hedging", response
        assert score(response, "\\boxed{3} ++++++ \\boxed{4}") == 1.0, response  # unless the gold has both parts


def test_one_operator_between_two_gold_boxes_is_no_divider() -> None:
    assert reference_answer("\\boxed{2} + \\boxed{3}") == "3"


# --- a gold of several equations joined by words -------------------------------------------------------------------

def test_equations_joined_by_words_in_a_gold_are_a_list_never_a_chain() -> None:
    """``x = 1 \\text{ and } x = -1`` was read as the chain x = 1 and x = -1, so ``x = -1`` alone scored 1."""
    gold = "x = 1 \\text{ and } x = -1"
    for right in ("The solutions are $x = 1$ and $x = -1$.", "So $x = 1$ or $x = -1$.", "$x = \\pm 1$",
                  "\\boxed{x = 1, x = -1}", "\\boxed{1, -1}"):
        assert score(right, gold) == 1.0, right
    for wrong in ("$x = -1$", "The only solution is $x = 1$.", "So $x = 1$, $x = -1$ or $x = 2$.",
                  "So $y = 1$ or $y = -1$.", "\\boxed{1, -1, 2}"):
        assert score(wrong, gold) == 0.0, wrong


def test_function_solutions_in_a_gold_accept_the_argument_renamed() -> None:
    """A functional equation's solutions (Numina: ``W(n) = 1 and W(n) = -1``): the same functions with the argument
    named x are the same answer; another function's name, a missing solution or an extra one are not."""
    for gold in ("W(n) = 1 \\text{ and } W(n) = -1", "\\boxed{W(n) = 1 \\text{ and } W(n) = -1",
                 "\\\\boxed{W(n) = 1 \\\\text{ and } W(n) = -1"):
        for right in ("Therefore, the only functions satisfying the equation are $W(x) = 1$ and $W(x) = -1$.",
                      "So the solutions are \\boxed{W(x) = 1} and \\boxed{W(x) = -1}.",
                      "The answer is $W(x) = -1$ or $W(x) = 1$.", "W(x)=1orW(x)=-1"):
            assert score(right, gold) == 1.0, (gold, right)
        for wrong in ("Therefore the only function is $W(x) = -1$.", "$W(x) = 1$",
                      "The answer is $V(x) = 1$ or $V(x) = -1$.", "The answer is $W(x) = 1$ or $V(x) = -1$.",
                      "So the solutions are \\boxed{W(x) = 1 \\text{ or } W(x) = -1 \\text{ or } W(x) = 0}."):
            assert score(wrong, gold) == 0.0, (gold, wrong)


def test_a_function_value_with_plus_minus_is_both_functions() -> None:
    """``W(x) = \\pm 1`` (which the LaTeX parser cannot read) is the two functions W = 1 and W = -1: the gold's pair,
    against one function a hedge."""
    gold = "W(n) = 1 \\text{ and } W(n) = -1"
    assert score("So the solutions are \\boxed{W(x) = \\pm 1}.", gold) == 1.0
    assert score("So the solutions are \\boxed{W(x) = \\pm 2}.", gold) == 0.0
    assert score("So the solutions are \\boxed{V(x) = \\pm 1}.", gold) == 0.0
    hedge = verdict("So the solution is \\boxed{W(x) = \\pm 1}.", "W(n) = 1")
    assert hedge.score == 0.0 and hedge.details["method"] == "hedging"
    assert score("Hence $f(x) = x$ and $f(x) = -x$.", "f(x) = \\pm x") == 1.0
    assert score("Hence $f(x) = x$.", "f(x) = \\pm x") == 0.0


def test_an_equation_names_the_gold_quantity() -> None:
    """A gold that names the variable the question asked for: another variable's equation is another answer (as
    Math-Verify reads it too); the value alone is the gold's value."""
    assert score("Hence $y = 1$.", "x = 1") == 0.0
    assert score("Hence $x = 1$.", "x = 1") == 1.0
    assert score("Hence the value is $1$.", "x = 1") == 1.0
    assert score("Hence $g(x) = x$.", "f(x) = x") == 0.0
    assert score("Hence $f(y) = y$.", "f(x) = x") == 1.0


def test_several_equations_against_one_value_are_a_hedge() -> None:
    for response in ("So \\boxed{x = 1 \\text{ or } x = -1}.", "So x=1orx=-1", "The answer is $x = 1$ or $x = -1$."):
        v = verdict(response, "x = 1")
        assert v.score == 0.0 and v.details["method"] == "hedging", response


# --- connectives glued to the values around them --------------------------------------------------------------------

def test_glued_connectives_are_words() -> None:
    gold = "x = 1 \\text{ and } x = -1"
    assert score("So x=1orx=-1", gold) == 1.0
    assert score("$x=1\\text{or}x=-1$", gold) == 1.0
    assert score("So x=1orx=-1orx=2", gold) == 0.0
    found = extract("So x=1orx=-1")
    assert found is not None and found.answers == ["x=1", "x=-1"]
    # never inside a word: "2order" has no value after the "or"
    found = extract("The permutation has 2order")
    assert found is None or found.answers != ["2", "der"]


def test_the_new_readers_stay_linear_on_floods() -> None:
    """Hostile floods of what the new readers look for (CPU time, so a loaded machine does not decide it)."""
    floods = ["\\boxed{1" + " or 2" * 30_000, "\\boxed{" * 30_000 + "5", "x)orA" * 40_000, "1orx=" * 40_000,
              "\\boxed{1} ++" * 20_000, "\\\\text{ and }" * 20_000,
              "\\boxed{1}" + "|" * 19_000 + "x\\boxed{2}", "\\boxed{1}" + " -- |" * 4_000 + "x\\boxed{2}"]
    for text in floods:
        started = time.process_time()
        extract(text)
        reference_answer(text[:20_000])
        score(text[-10_000:], "x = 1 \\text{ and } x = -1")
        assert time.process_time() - started < 3, text[:30]
