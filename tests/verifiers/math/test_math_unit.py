"""The math verifier in-process: extraction methods, the equivalence cascade, hedging, hacking and every failure
mode of field notes §2, each decided by the real Verifier class."""
from __future__ import annotations

import pytest

from verifiers.kinds.math.extract import extract, split_alternatives
from verifiers.kinds.math.verifier import MathVerifier
from verifiers.types import InvalidReference, Status, Verdict

V = MathVerifier()


def check(response: str, reference: object, **options: object) -> Verdict:
    return V.check(response, reference, V.parse_options(options))


def accepted(response: str, reference: object, **options: object) -> bool:
    verdict = check(response, reference, **options)
    assert verdict.status in (Status.OK, Status.REJECTED, Status.NO_ANSWER), verdict
    return verdict.score == 1.0


# --- field notes §2: false positives of rule-based checkers must be rejected ------------------------------------

@pytest.mark.parametrize(
    "response, reference",
    [
        (r"The result is $\boxed{\frac{1}{2004!}}$.", r"\frac{1}{2006!}"),
        (r"\boxed{\frac{1}{2006!}}", r"\frac{1}{2004!}"),
        (r"\boxed{y = 2x + 1}", "y = 3x + 1"),
        (r"\boxed{x + y = 1}", "x - y = 1"),
        (r"\boxed{y = x + 2}", "y = x - 2"),
        (r"\boxed{\forall x>0, f(x)=0}", "f(x)=0"),
        (r"\boxed{f(x)=0}", r"\forall x>0, f(x)=0"),
        (r"\boxed{2\sqrt{3}}", r"2\sqrt{2}"),
        (r"\boxed{(2, 1)}", "(1, 2)"),
        (r"\boxed{[1, 2)}", "(1, 2]"),
        (r"\boxed{1728.0001}", "1728"),
        (r"\boxed{0.33}", r"\frac{1}{3}"),
        (r"\boxed{6 + 5i}", "6 - 5i"),
        (r"\boxed{x > 3}", r"x \geq 3"),
    ],
)
def test_known_false_positives_are_rejected(response: str, reference: str) -> None:
    verdict = check(response, reference)
    assert verdict.score == 0.0, verdict
    assert verdict.status in (Status.OK, Status.REJECTED)


@pytest.mark.parametrize(
    "response, reference",
    [
        (r"\boxed{\pm 2021}", "2021"),
        ("The answers are 1331 and 1728.", "1728"),
        (r"So $\boxed{1331 \text{ and } 1728}$", "1728"),
        (r"\boxed{1331, 1728}", "1728"),
        (r"First \boxed{4}, or maybe \boxed{5}", "4"),
        ("The answer is 4 or 5 or 6", "5"),
        (r"The final answer is $x = 2$ or $x = 3$", "2"),
    ],
)
def test_hedging_is_rejected_with_a_reason(response: str, reference: str) -> None:
    verdict = check(response, reference)
    assert verdict.status is Status.REJECTED and verdict.score == 0.0, verdict
    assert verdict.reason


def test_repeating_the_same_answer_is_not_hedging() -> None:
    verdict = check(r"We get \boxed{\frac{1}{2}}. Double-checking: \boxed{0.5}", r"\frac12")
    assert verdict.status is Status.OK and verdict.score == 1.0


def test_several_answers_match_a_multi_valued_gold() -> None:
    assert accepted(r"The roots are \boxed{1} and \boxed{-2}", "1,-2")
    assert accepted(r"\boxed{1 + \sqrt{19}, 1 - \sqrt{19}}", r"1 \pm \sqrt{19}")
    assert not accepted(r"\boxed{1 + \sqrt{19}}", r"1 \pm \sqrt{19}")


# --- field notes §2: false negatives of rule-based checkers must be accepted ------------------------------------

@pytest.mark.parametrize(
    "response, reference",
    [
        (r"\boxed{\sqrt{1/n}}", r"\frac{1}{\sqrt{n}}"),
        ("The answer is -1+exp(16)", r"e^{16}-1"),
        ("Answer: pi/2", r"\dfrac{\pi}{2}"),
        (r"After simplifying, we get \dfrac{9}{7}", r"\frac{9}{7}"),
        (r"\boxed{\frac{12}{36}}", r"\frac{1}{3}"),
        ("sqrt(1/n)", r"\sqrt{\frac{1}{n}}"),
        (r"\boxed{\sqrt{8}}", r"2\sqrt{2}"),
        (r"\boxed{(x-1)(x^4+x^2+1)}", r"x^5 - x^4 + x^3 - x^2 + x - 1"),
        (r"\boxed{2x + 2y = 2}", "x + y = 1"),
        (r"\boxed{-5x + 7y - 11z - 4 = 0}", "5x - 7y + 11z + 4 = 0"),
        (r"\boxed{x = 5}", "5"),
        (r"\boxed{5}", "x=5"),
        (r"\boxed{-5i + 6}", "6 - 5i"),
        (r"\boxed{x > 3}", r"(3, \infty)"),
        (r"\boxed{[-2, 7]}", r"x \in [-2,7]"),
        (r"\boxed{\{2, 1\}}", "1, 2"),
        (r"\boxed{\begin{pmatrix} -1/3 \\ 2/3 \end{pmatrix}}",
         r"\begin{pmatrix} -\frac{1}{3} \\ \frac{2}{3} \end{pmatrix}"),
        (r"\boxed{0.5}", r"\frac12"),
        (r"\boxed{0.3333333333}", r"\frac13"),
        (r"\boxed{1.5707963268}", r"\frac{\pi}{2}"),
        (r"\boxed{1.8}", r"1\frac{4}{5}"),
        (r"\boxed{50\%}", "50"),
        (r"\boxed{90^\circ}", "90"),
        (r"\boxed{\$18.90}", r"\$18.90"),
        (r"\boxed{5.4}", r"5.4 \text{ cents}"),
        (r"\boxed{10080}", r"10,\!080"),
        (r"\boxed{1.2 \times 10^{5}}", "120000"),
        ("1.2e5", "120000"),
        (r"\boxed{\text{Evelyn}}", r"\text{Evelyn}"),
        ("The answer is Evelyn.", r"\text{Evelyn}"),
        (r"\boxed{C}", r"\text{(C)}"),
        (r"\boxed{52_8}", "52_8"),
        (r"\boxed{2\sqrt{3}}", r"\sqrt{12}"),
        (r"\boxed{\frac{\cos x}{\sin x}}", r"\cot x"),
    ],
)
def test_equivalent_forms_are_accepted(response: str, reference: str) -> None:
    verdict = check(response, reference)
    assert verdict.status is Status.OK and verdict.score == 1.0, verdict
    assert verdict.details["method"] in {"string", "numeric", "symbolic", "text"}


def test_details_name_the_deciding_method() -> None:
    assert check(r"\boxed{\frac{3}{4}}", r"\frac34").details["method"] == "string"
    assert check(r"\boxed{0.75}", r"\frac34").details["method"] == "numeric"
    assert check(r"\boxed{\sqrt{8}}", r"2\sqrt2").details["method"] == "symbolic"


# --- extraction -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "response, extracted, method",
    [
        (r"thus $\boxed{\frac{a}{\sqrt{b^{2}}}}$ done", r"\frac{a}{\sqrt{b^{2}}}", "boxed"),
        (r"\fbox{42}", "42", "boxed"),
        ("Work... #### 1,234", "1,234", "gsm8k_hashes"),
        ("So the final answer is $7$. I hope it is correct.", "7", "answer_phrase"),
        ("Answer: 12 apples", "12 apples", "answer_phrase"),
        ("Thus we get\n\n**17**", "17", "bold"),
        ("Hence\n\\[ x^2 + 1 \\]", "x^2 + 1", "display_math"),
        ("Hence\n\\[ x^2 + 1 \\] where $x$ is the side.", "x^2 + 1", "display_math"),
        ("Using the identity \\[ \\cos A = -\\cos B = -\\frac{1}{3} \\] Therefore, $\\cos A = -\\frac{1}{3}$.",
         "\\cos A = -\\frac{1}{3}", "inline_math"),  # the concluding sentence after the display states the answer
        ("We compute and obtain $3\\sqrt{2}$", "3\\sqrt{2}", "inline_math"),
        ("Simplifying gives \\dfrac{9}{7}", "\\dfrac{9}{7}", "bare_latex"),
        ("pi/2", "pi/2", "plain_text"),
        ("I computed 3 things, 4 of them, finally 5 remain.\nThat is all there is to it.", "5", "last_number"),
        ("<think>maybe \\boxed{3}</think>The result is \\boxed{4}", "4", "boxed"),
    ],
)
def test_extraction_methods(response: str, extracted: str, method: str) -> None:
    found = extract(response)
    assert found is not None
    assert found.method == method
    assert found.answers[-1] == extracted


def test_extraction_reported_in_details() -> None:
    verdict = check("So the final answer is $\\frac{3}{4}$.", "0.75")
    assert verdict.details["extracted"] == "\\frac{3}{4}"
    assert verdict.details["extraction"] == "answer_phrase"
    assert verdict.score == 1.0


def test_last_number_fallback_is_configurable() -> None:
    text = "I tried several things and ended with 42 as the count.\nNothing more."
    assert accepted(text, "42")
    off = check(text, "42", last_number_fallback=False)
    assert off.status is Status.NO_ANSWER and off.score == 0.0


def test_split_alternatives() -> None:
    assert split_alternatives("4 or 5 or 6") == ["4", "5", "6"]
    assert split_alternatives(r"1331 \text{ and } 1728") == ["1331", "1728"]
    assert split_alternatives(r"\{1 \text{ or } 2\}") == [r"\{1 \text{ or } 2\}"]  # inside braces: one answer


def test_multiple_choice_letters() -> None:
    assert accepted("After elimination the right option is (B).", "B")
    assert not accepted(r"\boxed{D}", r"\text{(B)}")


# --- judge hacking, empty answers, bounded input ----------------------------------------------------------------

@pytest.mark.parametrize("response", [":", ".", "Thought process:", "Let's solve this problem step by step.",
                                      "Solution", "かいせつ", r"\boxed{:}"])
def test_judge_hacking_strings_score_zero(response: str) -> None:
    verdict = check(response, "5")
    assert verdict.score == 0.0 and verdict.status in (Status.REJECTED, Status.NO_ANSWER), verdict
    assert verdict.reason


@pytest.mark.parametrize("response", ["", "   ", r"\boxed{}", r"The answer is \boxed{ }"])
def test_empty_answers_are_no_answer(response: str) -> None:
    verdict = check(response, "5")
    assert verdict.status is Status.NO_ANSWER and verdict.score == 0.0


def test_long_response_checked_on_its_tail_only() -> None:
    response = r"\boxed{7} " + "filler text " * 2000 + r" so the answer is \boxed{5}"
    verdict = check(response, "5", tail_chars=1000)
    assert verdict.score == 1.0
    assert verdict.details["truncated_to_tail"] == 1000
    # The same response unclipped has two different boxes: hedging.
    assert check(response, "5", tail_chars=1_000_000).status is Status.REJECTED


# --- references ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reference", ["}{", r"\frac{1}{", "", "   ", None, True, [], {"a": 1}, float("nan")])
def test_unusable_reference_is_invalid_never_a_reward(reference: object) -> None:
    with pytest.raises(InvalidReference):
        check(r"\boxed{}{}" if reference == "}{" else r"\boxed{\frac{1}{}", reference)


def test_unparseable_reference_with_identical_response_still_invalid() -> None:
    with pytest.raises(InvalidReference):
        check(r"\boxed{\frac{1}{2}+}", r"\frac{1}{2}+")


def test_reference_forms() -> None:
    assert accepted(r"\boxed{27}", 27.0)
    assert accepted(r"\boxed{25}", "025")
    assert accepted(r"\boxed{3}", ["three", "3"])  # any of several acceptable answers
    assert accepted("#### 18", "Janet makes 9 * 2 = 18 dollars.\n#### 18")
    assert accepted(r"\boxed{4}", r"so $\boxed{4}$")


# --- size guards: answers that would never finish evaluating ------------------------------------------------------

@pytest.mark.parametrize("answer", [r"10^{10^{10^{10}}}", r"(10^{200})!", r"2^{2^{2^{2^{2^{2}}}}}",
                                    "(" + "9" * 200 + ")!"])
def test_huge_answers_are_refused_quickly(answer: str) -> None:
    verdict = check(rf"\boxed{{{answer}}}", "5")
    assert verdict.status is Status.OK and verdict.score == 0.0
    assert verdict.details["method"] in {"size_guard", "symbolic"}


def test_huge_reference_only_matches_itself() -> None:
    assert accepted(r"\boxed{10^{10^{10^{10}}}}", r"10^{10^{10^{10}}}")
    with pytest.raises(InvalidReference):
        check(r"\boxed{5}", r"10^{10^{10^{10}}}")


# --- a final statement that names the quantity: "AB = 7" ------------------------------------------------------------

@pytest.mark.parametrize("response, reference", [
    (r"Therefore, $\cos \angle RPS = -\frac{24}{25}$.", r"-\frac{24}{25}"),  # a ProcessBench (Qwen) ending
    (r"Thus $AB = 7$", "7"),
    (r"Hence $f(2) = 5$.", "5"),
    (r"So $P(A) = \frac{3}{8}$", "0.375"),
    (r"\boxed{f(x) = 2x+3}", "2x+3"),
    (r"The area is $\pi r^2 = 4\pi$.", r"4\pi"),
    # ProcessBench (GSM8K) endings: a computation, sentences with one number, a "\$15" that lost its dollar sign
    (r"\[ \text{Volume of Timothy's locker} = 20 \times 2 = 40 \text{ cubic inches} \]", "40"),
    (r"so the height of the fourth child is \(69 + 3 = 72\) inches.", "72"),
    ("**Answer:** Verna received $7.00 in change.", "7"),
    ("Therefore, Freda used **12 tomatoes** to make her batch of tomato sauce.", "12"),
    (r"Therefore, Annika has $15 left. The final answer is: \boxed{\15}", "15"),
])
def test_a_named_quantity_with_the_gold_value_is_accepted(response: str, reference: str) -> None:
    assert accepted(response, reference)


@pytest.mark.parametrize("response, reference", [
    (r"We add: $x = 5+5+1 = 7 = 11$", "x = 11"),  # a slip on the way: the last value is the stated one
    (r"We add: $x = 5+5+1 = 7 = 11$", "11"),
    (r"$x = 1 = 5$", "5"),
    (r"$20 \times 2 = 41 = 40$", "40"),
    (r"\boxed{n = 3 \cdot 4 = 12}", "n = 12"),
])
def test_a_chain_states_its_last_value(response: str, reference: str) -> None:
    assert accepted(response, reference)


@pytest.mark.parametrize("response, reference", [
    (r"Thus $AB = 8$", "7"),
    (r"$4 = 5$", "4"),  # a chain states its last value only: listing values gains nothing
    (r"$x = 1 = 5$", "1"),
    (r"$20 \times 2 = 41 = 40$", "41"),
    (r"$x = 5 + 5 + 1 = 11 = 7$", "x = 11"),
    (r"$y = 5 + 5 + 1 = 7 = 11$", "x = 11"),  # the chain names another quantity
    (r"\boxed{x \le 5}", "5"),
    (r"\boxed{y = 5}", "y = 2x + 5"),  # an equation gold is compared as an equation
    ("The answer is at least 7 apples.", "7"),
    ("The answer is not 7 apples.", "7"),
    ("The answer is 3 times 7 apples.", "7"),
    ("Freda used 12 tomatoes and 3 cans.", "12"),
    ("Answer: 7 is wrong, I could not finish.", "7"),
])
def test_a_named_quantity_is_not_a_loophole(response: str, reference: str) -> None:
    assert not accepted(response, reference)


def test_prose_written_as_the_answer_is_no_answer_not_a_product_of_letters() -> None:
    # A real ProcessBench ending: "a precise numerical answer is arrived at through careful consideration of ...".
    verdict = check("Thus a precise numerical answer is arrived at through careful consideration of all cases.", "144")
    assert verdict.status == Status.NO_ANSWER and verdict.score == 0.0
    assert "prose" in verdict.reason
    assert accepted(r"The answer is $5\text{ square feet per minute}$.", "5")  # words inside \text are units


@pytest.mark.parametrize("response, reference", [
    (r"\boxed{\dfrac{-1 \pm \sqrt{5}}{2}}", r"\frac{-1+\sqrt5}{2}, \frac{-1-\sqrt5}{2}"),  # \pm inside a fraction
    (r"\boxed{\frac{-1+\sqrt5}{2}, \frac{-1-\sqrt5}{2}}", r"\frac{-1 \pm \sqrt{5}}{2}"),
    (r"\boxed{2(1 \mp \sqrt{3})}", r"2 - 2\sqrt{3}, 2 + 2\sqrt{3}"),
    (r"\boxed{0.\overline{3}}", r"\frac13"),  # repeating decimals are exact
    (r"\boxed{1.1\overline{6}}", r"\frac{7}{6}"),
    (r"\boxed{a=2, b=3}", "(2, 3)"),  # named values of an ordered pair, in order
    (r"\boxed{x=-2, x=1}", "1, -2"),  # the roots, named
])
def test_compound_forms_models_write(response: str, reference: str) -> None:
    assert accepted(response, reference)


def test_compound_forms_are_not_loopholes() -> None:
    assert check(r"\boxed{\dfrac{-1 \pm \sqrt{5}}{2}}", r"\frac{-1+\sqrt5}{2}").status == Status.REJECTED  # hedge
    assert not accepted(r"\boxed{0.\overline{3}}", "0.3")
    wrong_pair = check(r"\boxed{a=3, b=2}", "(2, 3)")
    assert wrong_pair.status == Status.OK and wrong_pair.score == 0.0  # a wrong pair, not a hedge
    assert check(r"\boxed{a=2, b=3}", "2").status == Status.REJECTED  # several values against one
