"""The math verifier on the formats real model outputs take: one test group per failure class seen on held-out sets
(currency, answer markers, golds that are not bare values, hedging false alarms, number formats, function
applications, runaway generations), then the per-source agreement with labels on real ProcessBench responses.

Responses are real solutions from ../shared/data (GSM8K's worked answers with their calculator annotations and
prices, ProcessBench's model outputs) finished in the styles models of several families and eras use; each style is
checked against the right gold (must score 1) and another problem's gold (must score 0)."""
from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from verifiers.kinds.math.extract import extract, own_turn
from verifiers.kinds.math.spans import escape_currency, math_spans
from verifiers.kinds.math.verifier import MathVerifier
from verifiers.types import InvalidReference, Status

V = MathVerifier()
OPTS = V.parse_options({})


def verdict(response: str, reference: object):
    return V.check(response, reference, OPTS)


def score(response: str, reference: object) -> float | None:
    """The score, None for an unusable reference (the engine reports that as ``invalid_reference``)."""
    try:
        return verdict(response, reference).score
    except InvalidReference:
        return None


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- 1. "$" as currency ------------------------------------------------------------------------------------------

def test_currency_dollars_are_not_math_delimiters() -> None:
    assert math_spans("It costs $12 each, so 3 cost $36.") == []
    assert math_spans("She makes 9 * $2 = $18 every day") == []
    assert [s.body for s in math_spans("We get $x = 5$ and $y=6$, paying $4.50.")] == ["x = 5", "y=6"]
    assert [s.body for s in math_spans(r"The answer is $\$70,000$.")] == [r"\$70,000"]
    assert escape_currency("pay $5 and $10") == r"pay \$5 and \$10"


@pytest.mark.parametrize("response,gold", [
    ("Each notebook costs $12, so 3 notebooks cost 3 * $12 = $36. So she paid $36 in total.", "36"),
    ("It costs $4.50 per pound, so 2 pounds cost $9.", "9"),
    ("Janet sells 16 - 3 - 4 = 9 eggs. She makes 9 * $2 = $18 every day at the farmers' market.", "18"),
    ("He earns 20*$15=$300 per week. In 4 weeks he earns 4*$300=$1200. The answer is $1200.", "1200"),
    ("Final Answer: The final answer is $\\$70,000$. I hope it is correct.", "70000"),
    ("The tickets cost $25 each and parking is $10, so the total is 2 * $25 + $10 = $60.\n\n**Answer:** $60", "60"),
    ("The price went from $80 to $100, an increase of $20, which is $\\frac{20}{80} = 25\\%$.", "25\\%"),
])
def test_prices_in_prose_are_read_as_prices(response: str, gold: str) -> None:
    assert score(response, gold) == 1.0
    assert score(response, "7") == 0.0


def test_two_different_prices_as_the_final_answer_are_still_a_hedge() -> None:
    v = verdict("So the answer is $12 or $15.", "15")
    assert v.status is Status.REJECTED and "several" in v.reason


# --- 2. final-answer markers, and generations that run past their turn ------------------------------------------

def _styles() -> dict[str, Callable[[str, str], str]]:
    def thousands(n: str, sep: str) -> str:
        return f"{int(n):,}".replace(",", sep) if n.lstrip("-").isdigit() else n

    return {
        "hashes": lambda b, n: f"{b}\n#### {n}",
        "hashes_inline": lambda b, n: f"{b} #### {n}",
        "answer_is": lambda b, n: f"{b}\nThe answer is {n}.",
        "answer_is_dollar": lambda b, n: f"{b} The answer is ${n}.",
        "a_colon": lambda b, n: f"{b}\nA: {n}",
        "minerva": lambda b, n: f"{b}\nFinal Answer: The final answer is ${n}$. I hope it is correct.",
        "minerva_dollar": lambda b, n: f"{b}\nFinal Answer: The final answer is $\\${n}$. I hope it is correct.",
        "bold_answer": lambda b, n: f"{b}\n\n**Answer:** {n}",
        "bold_final_display": lambda b, n: f"{b}\n\n**Final Answer**\n\\[ \\boxed{{{n}}} \\]",
        "paren_math": lambda b, n: f"{b}\nTherefore, the answer is \\({n}\\).",
        "answer_with_unit": lambda b, n: f"{b}\nAnswer: {n} dollars",
        "metamath": lambda b, n: f"{b}\nThe answer is: {n}",
        "currency_sentence": lambda b, n: f"{b}\n\nSo in the end the family pays ${n} in total.",
        "comma_thousands": lambda b, n: f"{b}\nThe answer is {thousands(n, ',')}.",
        "latex_thousands": lambda b, n: f"{b}\nThe answer is $\\boxed{{{thousands(n, '{,}')}}}$.",
        "space_thousands": lambda b, n: f"{b}\nThe answer is {thousands(n, ' ')}.",
        "boxed_dollar": lambda b, n: f"{b}\nThus the total is $\\boxed{{\\${n}}}$.",
        "markdown_heading": lambda b, n: f"{b}\n\n### Final Answer\n{n}",
        "chain": lambda b, n: f"{b}\nSo x = {n} - 1 + 1 = {n}.",
        "boxed_period": lambda b, n: f"{b}\nSo the answer is \\boxed{{{n}}}.",
        "bold_dollar": lambda b, n: f"{b}\n\n**Answer: ${n}**",
        "chat_preamble": lambda b, n: (f"Great question! Let's break it down.\n\n{b}\n\n"
                                       f"So, the answer is: ${n}\n\nI hope this helps!"),
        "answer_first": lambda b, n: f"The answer is {n}.\n\nExplanation: {b}",
        "concluding_sentence": lambda b, n: f"{b}\n\nTherefore, the number we are looking for is {n}.",
        "end_of_text_junk": lambda b, n: f"{b}\n#### {n}<|endoftext|>The following is a conversation 2 3",
    }


STYLES = _styles()


@pytest.fixture(scope="module")
def gsm8k(shared_data: Path) -> list[dict]:
    return load(shared_data / "math" / "gsm8k.test.jsonl")[:60]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_answer_styles_on_real_gsm8k_solutions(gsm8k: list[dict], style: str) -> None:
    """60 real worked solutions (prices, calculator annotations "<<9*2=18>>") ending in each style: the right gold
    scores 1, another problem's gold 0."""
    write = STYLES[style]
    wrong = right = 0
    for i, row in enumerate(gsm8k):
        body, answer = (part.strip() for part in row["answer"].rsplit("####", 1))
        answer = answer.replace(",", "")
        other = gsm8k[(i + 1) % len(gsm8k)]["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        response = write(body, answer)
        right += score(response, answer) == 1.0
        wrong += other != answer and score(response, other) != 0.0
    assert (right, wrong) == (len(gsm8k), 0)


def test_a_base_model_that_keeps_writing_few_shot_turns_is_graded_on_its_own_answer(gsm8k: list[dict]) -> None:
    """Older base models continue with the next "Question: ... Answer: ..." of their few-shot prompt."""
    graded = 0
    for i, row in enumerate(gsm8k[:30]):
        body, answer = (part.strip() for part in row["answer"].rsplit("####", 1))
        nxt = gsm8k[(i + 2) % len(gsm8k)]
        nbody, nanswer = (part.strip() for part in nxt["answer"].rsplit("####", 1))
        for response in (
            f"{body}\nThe answer is {answer}.\n\nQuestion: {nxt['question']}\nAnswer: {nbody} The answer is {nanswer}.",
            f"{body}\n#### {answer}\n\nQ: {nxt['question']}\nA: {nbody}\n#### {nanswer}",
            f"{body}\nA: {answer}\n\nQ: {nxt['question']}\nA: {nbody} So {nanswer}",
        ):
            graded += score(response, answer) == 1.0
            if nanswer != answer:
                assert score(response, nanswer) == 0.0
    assert graded == 90


def test_own_turn_cuts_only_after_a_stated_answer() -> None:
    restated = "Question: Tom has 3 apples and buys 2 more. How many?\nAnswer: 3 + 2 = 5. The answer is 5."
    assert own_turn(restated) == restated
    assert own_turn("The answer is 5.\n\nQuestion: next one\nThe answer is 7.") == "The answer is 5.\n\n"
    assert own_turn("#### 18<|im_end|>junk 3") == "#### 18"


@pytest.mark.parametrize("response,gold", [
    ("Therefore, the degree of the polynomial \\((ax^6+bx^8+cx^3+d)(x^5+ex^4+f)(x^2+gx+h)\\) is 15.", "15"),
    ("Comparing exponents: \\[ \\frac{n}{2} = 10 \\]\nTherefore, the number of terms \\( n \\) in the sequence is 20.",
     "20"),
    ("Final Answer: The smallest value of \\(n\\) such that \\(A_n \\geq K\\) is \\(n = 10\\).", "10"),
    ("We get (p, q) = (3, 2).", "(p, q) = (3, 2)"),
    ("Thus AB = 4 and CD = 5.", "AB = 4, CD = 5"),
    ("The area is 12 cm^2.", "12"),
    ("Solving, $n = 5$ and $n = 15$.", "5, 15"),
    ("\\[ V_{\\max} = \\frac{S^3}{6 \\cdot (3(1 + \\sqrt{2}))^3} \\]\n\nThis completes the solution.",
     "\\frac{S^3(\\sqrt{2}-1)^3}{162}"),
])
def test_answers_stated_without_a_marker(response: str, gold: str) -> None:
    assert score(response, gold) == 1.0


def test_a_conclusion_that_denies_its_value_is_not_an_answer() -> None:
    response = ("If we let \\( x = 14 \\), then \\( y = 15 \\). Substituting: \\[ 6(15) - 2(14) = 62, \\] which is "
                "not \\(-12\\). So, \\( x = 14 \\) and \\( y = 15 \\) is not a solution.")
    assert score(response, "15") == 0.0


def test_a_closing_paragraph_that_only_names_the_unknown_states_no_answer() -> None:
    """Real shape (ProcessBench olympiadbench-127): the model gives up and its last paragraph mentions only x; an
    earlier step's "3^x" must not be read as its answer, and x itself is not one either."""
    response = ("Rearrange: \\[2^x(9 \\cdot 2^{-x} - 27) = 3^x.\\]\n\n"
                "In practice, one might use computational tools to approximate the value(s) of \\(x\\) that "
                "satisfy the equation. The exact solution requires numerical methods.")
    assert extract(response) is None
    v = verdict(response, "3")
    assert (v.status, v.score) == (Status.NO_ANSWER, 0.0)


def test_unknowns_named_beside_the_answer_do_not_hide_it() -> None:
    """Real shape (ProcessBench math-926): the answer sits among inline mentions of the digits' names."""
    response = ("The probability, expressed as a common fraction, is approximately \\(1/3\\). This is based on "
                "the distribution of sums across different values of \\(C\\), given fixed \\(A\\) and "
                "\\(B\\).")
    assert score(response, "\\frac{1}{3}") == 1.0
    assert score(response, "\\frac{1}{6}") == 0.0
    letters = "All checks point to \\(C\\)."  # where a choice letter is expected, a lone letter is one
    found = extract(letters, choice_letters=True)
    assert found is not None and found.answers == ["C"]
    assert extract(letters) is None


@pytest.mark.parametrize("answer,gold,expected", [
    # Shapes from Omni-MATH golds and ProcessBench responses (omnimath-535, -637, -710, -926, -936).
    ("No", "\\text{No, it is not possible to cover all grid points with such discs.}", 1.0),
    ("no, there is no integer \\(n\\) such that \\(\\sqrt{n-1} + \\sqrt{n+1}\\) is rational", "\\text{No}", 1.0),
    ("No such constant exists", "$\\text{ No }$", 1.0),
    ("No, there does not exist such a field.", "There exist no such field.", 1.0),
    ("Yes, there must exist infinitely many positive integers $n$.",
     "Yes, there must exist infinitely many such n.", 1.0),
    ("\\text{Yes}", "YES", 1.0),
    ("\\text{Yes}", "\\text{There is no such polynomial.}", 0.0),
    ("No", "\\text{Yes}", 0.0),
    ("No simple manual solution provided.", "\\text{No such number exists}", 0.0),  # not an answer to the question
])
def test_yes_no_golds_compare_by_polarity(answer: str, gold: str, expected: float) -> None:
    assert score(f"Putting it together, the final answer is \\boxed{{{answer}}}.", gold) == expected


def test_a_yes_gold_that_carries_a_value_still_needs_the_value() -> None:
    assert score("The answer is \\boxed{Yes, n = 6}.", "Yes, n = 5") == 0.0


# --- 3. golds that are not bare values ---------------------------------------------------------------------------

@pytest.mark.parametrize("gold,answer", [
    ("(p, q) = (3, 2)", "(3, 2)"),
    ("\\((p, q) = (3, 2)\\)", "\\boxed{(3, 2)}"),
    ("(\\alpha, \\beta)=\\left(\\frac{3}{2}, \\frac{\\sqrt{2}}{3}\\right)",
     "\\left(\\frac{3}{2}, \\frac{\\sqrt{2}}{3}\\right)"),
    ("AB = 4, CD = 5", "AB = 4, CD = 5"),
    ("f(x) = 1", "f(x) = 1"),
    ("f(x)=x+22", "x + 22"),
    ("p(x)=\\frac{(x-1)(x-2)}{6}", "\\frac{(x-1)(x-2)}{6}"),
    ("f(m) = 2m + 1007", "f(n) = 2n + 1007"),
    ("|AB| = 1", "1"),
    ("x \\in [-2, 7]", "[-2, 7]"),
    ("x \\in [-2, 7]", "-2 \\le x \\le 7"),
    ("0 < f(x) < 1", "(0, 1)"),
    ("0 < f(x) < 1", "f(x) \\in (0, 1)"),
    ("\\boxed{2} and \\boxed{5}", "\\boxed{5}, \\boxed{2}"),
    ("$f(x)=x$,$f(x)=2-x$", "f(x) = x, f(x) = -x + 2"),
    ("$1,2,3$", "(1, 2, 3)"),
    ("$10^{3},10$", "(x, y) = (1000, 10)"),
    ("62.5%", "0.625"),
    ("0.625", "62.5\\%"),
    ("\\left(\\frac{1998}{1997}\\right)^{2} \\text{ or } \\frac{3992004}{3988009}", "\\frac{1998^2}{1997^2}"),
    ("f(x) = 0 \\text{ for all } x \\in \\mathbb{R}", "0"),
    ("f(n) = n^c \\text{ for some } c \\in \\mathbb{R}", "f(n) = n^c"),
    ("The only integral solution is \\((a, b, c) = (0, 0, 0)\\).", "(0, 0, 0)"),
    ("82 \\mathrm{~m}", "82m"),
])
def test_golds_that_are_not_bare_values(gold: str, answer: str) -> None:
    assert score(f"Therefore the answer is $\\boxed{{{answer}}}$." if "boxed" not in answer else answer, gold) == 1.0


@pytest.mark.parametrize("gold,answer", [
    ("(p, q) = (3, 2)", "(2, 3)"),
    ("$1,2,3$", "(1, 3, 2)"),
    ("f(x)=x+22", "x + 23"),
    ("f(x) = 0 \\text{ for } x > 0", "0"),  # a restricting condition still matters
    ("0 < f(x) < 1", "[0, 1)"),
    ("62.5%", "0.6"),
    ("x^2 + y^2 = 1", "1"),  # an equation of a curve is not a named value
    ("\\lfloor\\sqrt{n-1}\\rfloor", "\\left\\lfloor \\frac{n}{2} \\right\\rfloor"),
    ("\\boxed{2} and \\boxed{5}", "2"),
])
def test_golds_that_are_not_bare_values_still_reject_other_answers(gold: str, answer: str) -> None:
    assert score(f"Therefore the answer is $\\boxed{{{answer}}}$.", gold) == 0.0



@pytest.mark.parametrize("answer,gold,expected", [
    # MATH-style golds that name their value (MATH-500 has "x=5", "y = 2x + 3" and \mathbf{v} vectors).
    ("\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}", "\\mathbf{v} = \\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}", 1.0),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\mathbf{v} = \\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}", 0.0),
    ("2x + 3", "y = 2x + 3", 1.0),
    ("\\frac{\\pi}{3}", "\\theta = \\frac{\\pi}{3}", 1.0),
    ("1", "x^2 + y^2 = 1", 0.0),  # an equation, not a named value: its right side is not the answer
    ("y = 5", "x = 5", 0.0),  # an answer that names another quantity
])
def test_a_gold_that_names_its_value_accepts_the_value_alone(answer: str, gold: str, expected: float) -> None:
    assert score(f"Therefore the answer is $\\boxed{{{answer}}}$.", gold) == expected

# --- 4. the hedging guard: quiet on what is not a second answer, firm on several final answers ----------------------

@pytest.mark.parametrize("response,gold", [
    ("We need to fill in $3 + \\boxed{\\phantom{2}} = 5$.\nSubtracting, 5 - 3 = 2.\n"
     "So the missing number is $\\boxed{2}$.", "2"),
    ("What goes in the box $\\boxed{}$ so that $4 \\times \\boxed{} = 12$? Since 12/4 = 3, "
     "the answer is $\\boxed{3}$.", "3"),
    ("Which is larger: (A) 5 or (B) 7? Clearly 7 > 5, so the answer is (B).", "B"),
    ("Apples cost $2 each and pears $3 each. She buys 4 apples for $8 and 2 pears for $6. "
     "In total she pays $14.", "14"),
    ("Thus $B + R = 6$, so the total is $\\boxed{6}$. This contradicts our previous conclusion. Upon closer "
     "examination, the correct total number of students is $\\boxed{7}$.", "7"),
])
def test_no_false_hedge(response: str, gold: str) -> None:
    assert score(response, gold) == 1.0


# MATH 555 (ProcessBench): the box restates the question's value beside the answer, and the closing line gives the
# answer alone; a numeral in base 2 cannot be compared with 3/16 as a number, so only the restatement makes them one.
BASE_TWO = ("So, $3/16 = 1/8 + 1/16 = 0.0011_2$, where the radix point is between the second and third digits. "
            "Therefore, $\\boxed{{\\frac{{3}}{{16}} = 0.0011_2}}$. Final Answer: The final answer is {final}. "
            "I hope it is correct.")


@pytest.mark.parametrize("answer, gold, expected", [
    # Omni-MATH 962: the gold's bare \log is the natural log of an integral's value
    ("\\frac{\\pi}{8} \\ln(2)", "\\frac{\\pi \\log(2)}{8}", 1.0),
    ("\\frac{\\pi}{8} \\log 2", "\\frac{\\pi \\log(2)}{8}", 1.0),
    ("\\frac{\\pi}{8} \\ln 3", "\\frac{\\pi \\log(2)}{8}", 0.0),
    ("\\log_{10} 2", "\\ln 2", 0.0),  # a gold written with \ln never accepts a base-10 value
    ("\\ln 250", "\\log _{10} 250", 0.0),  # nor does an explicit base 10
])
def test_a_bare_log_in_the_gold_may_be_the_natural_log(answer: str, gold: str, expected: float) -> None:
    assert score(f"Therefore the value is ${answer}$.", gold) == expected


def test_a_boxed_restatement_beside_its_value_is_one_answer() -> None:
    assert score(BASE_TWO.format(final="0.0011_2"), "0.0011_{2}") == 1.0
    assert score(BASE_TWO.format(final="0.0011_2"), "0.0101_{2}") == 0.0
    # a closing line that gives another value is still a second answer
    assert verdict(BASE_TWO.format(final="0.0101_2"), "0.0011_{2}").status is Status.REJECTED


@pytest.mark.parametrize("response", [
    "The answer is 4 or 5.",
    "So the answer is \\boxed{4}. Alternatively it could be \\boxed{5}.",
    "The answer is $\\boxed{12}$ or $\\boxed{15}$.",
    "The number of red balls is \\boxed{12}. The number of blue balls is 3 * 12 = \\boxed{36}.",
])
def test_several_final_answers_are_rejected(response: str) -> None:
    for gold in ("5", "15", "36", "4", "12"):
        assert score(response, gold) == 0.0


# --- 5. number formats -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("response,gold", [
    ("The total is 10 000 dollars.", "10000"),
    ("The total is 10{,}000.", "10000"),
    ("The answer is $10\\,000$.", "10000"),
    ("The answer is 10,000.", "10000"),
    ("The answer is 3,5.", "3.5"),
    ("The answer is 1.2 \\times 10^{4}.", "12000"),
    ("Answer: 3.5e3", "3500"),
    ("It is 3.5 \\times 10^{-2}.", "0.035"),
    ("So she earns 25\\% more, i.e. the answer is 25\\%.", "25"),
    ("The final answer is 50 percent.", "50\\%"),
    ("The final answer is 0.5.", "50\\%"),
    ("Therefore the area is $12 \\text{ cm}^2$.", "12"),
])
def test_number_formats(response: str, gold: str) -> None:
    assert score(response, gold) == 1.0


def test_a_decimal_comma_is_read_only_against_a_decimal_gold() -> None:
    assert score("The answer is 3,5.", "35") == 0.0  # the list 3, 5, not a number


# --- 6. function applications ------------------------------------------------------------------------------------

@pytest.mark.parametrize("answer,gold,expected", [
    ("q(5)+5", "5+q(5)", 1.0),
    ("2f(3) - 1", "-1 + 2 f(3)", 1.0),
    ("q(5)+6", "5+q(5)", 0.0),
    ("q(4)+5", "5+q(5)", 0.0),
])
def test_function_applications_compare_as_expressions(answer: str, gold: str, expected: float) -> None:
    assert score(f"So the answer is $\\boxed{{{answer}}}$", gold) == expected


def test_extraction_reports_the_method() -> None:
    found = extract("Each costs $12, so in total she pays 3 * $12 = $36.")
    assert found is not None and found.answers == ["36"]


# --- real model outputs: per-source agreement with the labels ----------------------------------------------------

def test_processbench_answers_per_source_no_worse_than_math_verify(shared_data: Path) -> None:
    """3,397 real responses of 12 models (GSM8K, MATH, OlympiadBench, Omni-MATH) with labels: per source, our false
    positives and false negatives are each at most Math-Verify's (its defaults, in a 2-process pool)."""
    from benchmarks.math_agreement import confusion, mv_row

    path = shared_data / "math" / "processbench_answers.jsonl"
    if not path.exists():
        pytest.skip("processbench_answers.jsonl is absent")
    rows = load(path)
    ours = [score(r["response"], r["reference"]) == 1.0 for r in rows]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        theirs = [ok for ok, _ in pool.map(mv_row, [(r["response"], r["reference"]) for r in rows], chunksize=8)]
    mine, other = confusion(ours, rows), confusion(theirs, rows)
    table = {s: (mine["fp"][s], mine["fn"][s], other["fp"][s], other["fn"][s])
             for s in Counter(r["source"] for r in rows)}
    print(f"\nProcessBench answers (ours FP, FN; Math-Verify FP, FN): {table}")
    for source, (fp, fn, mv_fp, mv_fn) in table.items():
        assert fp <= mv_fp and fn <= mv_fn, (source, table[source])


@pytest.mark.parametrize("response,gold,expected", [
    ("**five integers**", "5", 1.0),
    ("The answer is twelve.", "12", 1.0),
    ("The answer is twelve.", "13", 0.0),
    ("The answer is the one with the largest area.", "1", 0.0),
])
def test_number_words(response: str, gold: str, expected: float) -> None:
    assert score(response, gold) == expected
