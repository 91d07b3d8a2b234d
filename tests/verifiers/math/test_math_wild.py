"""The math verifier on short, messy outputs from the wild, one group per failure class: chains of equalities,
Minerva closings that restate the quantity, prices in the closing statement, sets written several ways, decimal
commas in golds, answers left unevaluated, golds that are worked solutions, and hedges written without math markup.
Where a class can be built on real data (GSM8K's worked solutions, MATH-500's golds and solutions under
../shared/data), it is; each acceptance is paired with the rejections that keep it from being a loophole."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from verifiers.kinds.math.extract import closing_alternatives, extract, final_statements, own_turn
from verifiers.kinds.math.reference import reference_answer
from verifiers.kinds.math.verifier import MathVerifier
from verifiers.types import InvalidReference, Status

V = MathVerifier()
OPTS = V.parse_options({})


def score(response: str, reference: object) -> float | None:
    try:
        return V.check(response, reference, OPTS).score
    except InvalidReference:
        return None


def status(response: str, reference: object) -> Status:
    return V.check(response, reference, OPTS).status


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def gsm8k(shared_data: Path) -> list[dict]:
    path = shared_data / "math" / "gsm8k.test.jsonl"
    if not path.exists():
        pytest.skip("gsm8k.test.jsonl is absent")
    return load(path)[100:160]


@pytest.fixture(scope="module")
def math500(shared_data: Path) -> list[dict]:
    path = shared_data / "math" / "math500.test.jsonl"
    if not path.exists():
        pytest.skip("math500.test.jsonl is absent")
    return load(path)


def _gsm(row: dict) -> tuple[str, str]:
    body, gold = (part.strip() for part in row["answer"].rsplit("####", 1))
    return body, gold.replace(",", "")


# --- 1. a chain ends in the stated value --------------------------------------------------------------------------

@pytest.mark.parametrize("response, gold", [
    ("We add: $x = 5+5+1 = 7 = 11$", "x = 11"),
    ("We add: $x = 5+5+1 = 7 = 11$", "11"),
    ("So x=5+5+1=7=11.", "x=11"),
    ("\\boxed{x = 5+5+1 = 7 = 11}", "x = 11"),
    ("\\[ x = 5+5+1 = 7 = 11 \\]", "11"),
    ("Total = 5 + 6 = 11 apples", "11"),
    ("so $n = 2 \\cdot 17 = 34$", "n = 34"),
])
def test_a_chain_states_its_last_value(response: str, gold: str) -> None:
    assert score(response, gold) == 1.0


@pytest.mark.parametrize("response, gold", [
    ("So $x = 5+5+1 = 11 = 12$", "x = 11"),  # only the last value is compared
    ("So $m = 2 \\cdot 17 = 34$", "n = 34"),  # the chain names another quantity
    ("We add: $x = 5+5+1 = 7 = 11$", "7"),
])
def test_a_chain_is_no_loophole(response: str, gold: str) -> None:
    assert score(response, gold) == 0.0


def test_chains_on_real_gsm8k_computations(gsm8k: list[dict]) -> None:
    """The last calculator annotation of each real solution ("<<16-3-4=9>>") written as a named chain, once with a
    slip inside it: the right gold (bare and named) scores 1, another problem's gold 0."""
    checked = 0
    for i, row in enumerate(gsm8k):
        body, gold = _gsm(row)
        calls = re.findall(r"<<([^=<>]+)=([^<>]+)>>", body)
        if not calls or calls[-1][1] != gold:
            continue
        expr = calls[-1][0].replace("*", " \\cdot ")
        other = _gsm(gsm8k[(i + 1) % len(gsm8k)])[1]
        for response in (f"So $x = {expr} = {gold}$.", f"Thus $x = {expr} = {int(gold) + 3} = {gold}$"):
            assert score(response, gold) == 1.0, response
            assert score(response, f"x = {gold}") == 1.0, response
            if other != gold:
                assert score(response, other) == 0.0, response
        checked += 1
    assert checked >= 30


# --- 2. Minerva closings that restate the quantity, and the chat template's next turn ------------------------------

TAILS = [
    "<|im_start|>user\nNow find the smallest one.",
    "<|im_end|>\n<|im_start|>user\nThanks! What about 35?<|im_end|>",
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 12 * 12?<|eot_id|>",
    "</s><s>[INST] Now compute 12 + 30. [/INST]",
    "<\uff5cend\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>Find 3 + 4.",
    "<|end|>\n<|user|>\nWhat is 100 divided by 4?<|end|>",
    "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>How many sides does a hexagon have? 6",
    "<end_of_turn>\n<start_of_turn>user\nAnd 9 squared?",
    "\n\nUser: great, now what is 2 to the power 10?\nAssistant: 1024",
    "",
]


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("closing", [
    "Final Answer: The largest $n$ is {v}.",
    "Final Answer: The maximum number of points that can be chosen is {v}.",
    "Final answer: the largest such $n$ equals {v}.",
    "**Final Answer:** The required number is ${v}$.",
    "Final Answer: The largest $n$ for which this holds is $n = {v}$.",
    "### Final Answer\n\n${v}$",
    "=> {v}",
    "ans: {v}",
])
def test_closing_statements_followed_by_the_next_turn(closing: str, tail: str) -> None:
    response = "Checking each case in turn, the condition fails first at the next value.\n\n" + closing.format(v=34)
    assert score(response + tail, "34") == 1.0
    assert score(response + tail, "35") == 0.0


def test_the_turn_ends_at_special_tokens_and_chat_roles_only() -> None:
    assert own_turn("<|im_start|>assistant\nThe answer is 5<|im_end|>\n<|im_start|>user\n7") == \
        "<|im_start|>assistant\nThe answer is 5"
    assert own_turn("We need $0 <|x_1|> 3$ here.") == "We need $0 <|x_1|> 3$ here."  # |x_1| in math is no token
    assert own_turn("User: restated problem with 3 apples") == "User: restated problem with 3 apples"
    assert own_turn("So 17 apples.\n\nUser: and 4?") == "So 17 apples.\n\n"


def test_minerva_closings_on_real_gsm8k_solutions(gsm8k: list[dict]) -> None:
    """Real solutions (prices, calculator annotations) closed the way Minerva-style prompts make models close them,
    each followed by a chat template's next turn that holds other numbers."""
    for i, row in enumerate(gsm8k):
        body, gold = _gsm(row)
        other = _gsm(gsm8k[(i + 3) % len(gsm8k)])[1]
        tail = TAILS[i % len(TAILS)]
        for closing in (f"Final Answer: The total is {gold}.", f"Final Answer: The number of items is ${gold}$.",
                        f"**Final Answer**\n\n{gold}"):
            response = f"{body}\n\n{closing}{tail}"
            assert score(response, gold) == 1.0, response
            if other != gold:
                assert score(response, other) == 0.0, response


def test_a_verification_remark_is_not_the_answer() -> None:
    response = ("We may check our answer: $17 \\cdot 44 = 748$, so our answer is correct.\n\n"
                "Thus, the modular inverse is $44$.")
    assert score(response, "44") == 1.0


# --- 3. prices in the closing statement ----------------------------------------------------------------------------

@pytest.mark.parametrize("response", [
    "$10,200 + $255 = $10,455. Final Answer: The final answer is $10,455$.",
    "$10,200 + $255 = $10,455.\nFinal Answer: The final answer is $10,455. I hope it is correct.",
    "$10,200+$255=$10,455. Final Answer: The final answer is $10,455$.",
    "The car costs $10,200 and tax is $255, so $10,200 + $255 = $10,455. Final Answer: The total cost is $10,455.",
    "Final Answer: $10,200 + $255 = $10,455.",
    "$10,200 + $255 = $10,455. **Final Answer:** $10,455<|eot_id|>",
    "10,200$ + 255$ = 10,455$. Final Answer: The final answer is 10,455$.",
])
def test_prices_in_the_closing_statement_are_one_answer(response: str) -> None:
    for gold in ("10455", "10,455", "\\$10,455"):
        assert score(response, gold) == 1.0, (response, gold)
    assert score(response, "10200") == 0.0


# --- 4. sets written several ways -----------------------------------------------------------------------------------

@pytest.mark.parametrize("response, gold, expected", [
    ("The solutions are $\\boxed{-2,1}$.", "$\\boxed{1}$ and $\\boxed{-2}$", 1.0),
    ("The solutions are $\\boxed{-2,1}$.", "\\boxed{1} and \\boxed{-2}", 1.0),
    ("The solutions are $x=-2$ and $x=1$.", "$\\boxed{1}$, $\\boxed{-2}$", 1.0),
    ("The solution is $\\boxed{-2}$.", "$\\boxed{1}$ and $\\boxed{-2}$", 0.0),
    ("The answer is $(1,3)$.", "\\{1,3\\}", 1.0),  # a gold that is a set of solutions
    ("The answer is $\\boxed{(3,1)}$.", "{1,3}", 1.0),
    ("The answer is $\\boxed{(1,3)}$.", "\\{1,3,5\\}", 0.0),
    ("The answer is $[1,3]$.", "\\{1,3\\}", 0.0),  # brackets write a closed interval
    ("The answer is $\\{1,3\\}$.", "(1,3)", 0.0),  # the gold is an interval or a point, not a set
    ("The answer is $\\{1,3\\}$.", "[1,3]", 0.0),
    ("The answer is 1 papers and 2 bins.", "1, 2", 1.0),
    ("The answer is $\\boxed{1, 2}$.", "1 papers and 2 bins", 1.0),
    ("So he needs 1 paper and 2 bins.", "1, 2", 1.0),
    ("The answer is 1 papers and 3 bins.", "1 papers and 2 bins", 0.0),
])
def test_sets_written_several_ways(response: str, gold: str, expected: float) -> None:
    assert score(response, gold) == expected


def test_a_list_of_counted_quantities_against_one_value_is_a_hedge() -> None:
    assert status("So he needs 1 paper and 2 bins.", "2") is Status.REJECTED
    assert status("The answer is 1 papers and 2 bins.", "1") is Status.REJECTED


def test_math500_multi_answer_golds_as_boxes_and_sets(math500: list[dict]) -> None:
    """MATH-500's comma-list golds (roots, solution sets) written as several boxes or as a set, against the values
    listed in another order: accepted; against one of the values only: not."""
    multi = [r["answer"] for r in math500 if re.fullmatch(r"-?\w+(?:\s*,\s*-?\w+)+", r["answer"])
             and not re.fullmatch(r"\d{1,3}(?:,\d{3})+", r["answer"])]  # "58,500" is one number
    assert len(multi) >= 3
    for gold in multi:
        parts = [p.strip() for p in gold.split(",")]
        rev = ", ".join(reversed(parts))
        for written in (" and ".join(f"$\\boxed{{{p}}}$" for p in parts), f"\\{{{gold}\\}}"):
            assert score(f"The solutions are $\\boxed{{{rev}}}$.", written) == 1.0, (gold, written)
            assert score(f"The solutions are $({rev})$.", written) == 1.0, (gold, written)
            assert score(f"The solution is $\\boxed{{{parts[0]}}}$.", written) == 0.0, (gold, written)


# --- 5. decimal commas in golds --------------------------------------------------------------------------------------

@pytest.mark.parametrize("response, gold, expected", [
    ("The answer is $\\boxed{1.22}$.", "1,22", 1.0),
    ("The answer is $\\boxed{0.111}$.", "0,111", 1.0),  # "0," never groups thousands
    ("So the price is \\$2.74.", "2,74 $", 1.0),
    ("Final Answer: The final answer is $2.74$.", "2,74 €", 1.0),
    ("The answer is 2.74 €", "2,74 €", 1.0),
    ("Total: €2.74", "2,74", 1.0),
    ("The answer is 1,22", "1.22", 1.0),  # and in answers, against a decimal gold
    ("The answer is 0,111", "0.111", 1.0),
    ("The answer is (1, 22)", "1,22", 1.0),  # against a list, the gold's comma separates a list
    ("The answer is $\\boxed{122}$.", "1,22", 0.0),
    ("The answer is $\\boxed{0111}$.", "0,111", 0.0),
    ("The answer is $\\boxed{1.23}$.", "1,22", 0.0),
    ("The answer is 1000", "1,000", 1.0),  # three digits after a nonzero digit: a thousands separator
    ("The answer is 1.000", "1,000", 0.0),
    ("The answer is 7.125", "7,125", 0.0),
    ("The answer is 7125", "7,125", 1.0),
])
def test_decimal_commas_and_thousands_separators(response: str, gold: str, expected: float) -> None:
    assert score(response, gold) == expected


def test_decimal_comma_golds_on_real_decimal_answers(math500: list[dict]) -> None:
    decimals = [r["answer"] for r in math500 if re.fullmatch(r"-?\d*\.\d{1,2}|-?0\.\d+", r["answer"])]
    assert len(decimals) >= 5
    for gold in decimals:
        comma = gold.replace(".", ",")
        assert score(f"The answer is $\\boxed{{{gold}}}$.", comma) == 1.0, gold
        assert score(f"Final Answer: The final answer is ${gold}$.", f"{comma} $") == 1.0, gold
        assert score(f"The answer is $\\boxed{{{float(gold) + 1:g}}}$.", comma) == 0.0, gold


# --- 6. answers left unevaluated ------------------------------------------------------------------------------------

def _matrix(rows: list[list[int]]) -> str:
    return "\\begin{pmatrix} " + " \\\\ ".join(" & ".join(map(str, r)) for r in rows) + " \\end{pmatrix}"


@pytest.mark.parametrize("response, gold, expected", [
    (f"The sum is ${_matrix([[1, 2], [3, 4]])} + {_matrix([[5, 6], [7, 8]])}$.", _matrix([[6, 8], [10, 12]]), 1.0),
    (f"The sum is ${_matrix([[1, 2], [3, 4]])} + {_matrix([[5, 6], [7, 8]])}$.", _matrix([[6, 8], [10, 11]]), 0.0),
    (f"So $A - B = {_matrix([[6, 8], [10, 12]])} - {_matrix([[5, 6], [7, 8]])}$.", _matrix([[1, 2], [3, 4]]), 1.0),
    (f"The product is ${_matrix([[1, 2], [3, 4]])}{_matrix([[1], [1]])}$.", _matrix([[3], [7]]), 1.0),
    (f"The answer is $3 {_matrix([[1], [2]])}$.", _matrix([[3], [6]]), 1.0),
    (f"So ${_matrix([[1, 1], [0, 1]])}^{{5}}$.", _matrix([[1, 5], [0, 1]]), 1.0),
    ("So the answer is $\\frac{1}{2} + \\frac{1}{3}$.", "\\frac{5}{6}", 1.0),
    (f"The sum is $A + {_matrix([[1, 2], [3, 4]])}$.", _matrix([[1, 2], [3, 4]]), 0.0),  # A is unknown here
])
def test_an_answer_left_as_a_sum_of_written_out_matrices(response: str, gold: str, expected: float) -> None:
    assert score(response, gold) == expected


def test_matrix_arithmetic_is_bounded() -> None:
    """Only small explicit operands are evaluated; a large power or a huge entry is not worked out."""
    big = _matrix([[1] * 12 for _ in range(12)])
    started = time.process_time()
    assert score(f"The answer is ${big} + {big}$.", _matrix([[2] * 12 for _ in range(12)])) == 0.0
    assert score(f"So ${_matrix([[2, 0], [0, 2]])}^{{100000}}$.", _matrix([[1, 0], [0, 1]])) == 0.0
    huge = "\\begin{pmatrix} 10^{10^{8}} & 0 \\\\ 0 & 2 \\end{pmatrix}"
    assert score(f"So ${huge} + {_matrix([[1, 0], [0, 1]])}$.", _matrix([[1, 0], [0, 3]])) == 0.0
    assert time.process_time() - started < 5


# --- 7. golds that are worked solutions ----------------------------------------------------------------------------

@pytest.mark.parametrize("gold, answer, expected", [
    ("There are 25 students and 7 of them passed. 7/25 = 0.28, so the answer is $\\boxed{28\\%}$.", "28%", 1.0),
    ("There are 25 students and 7 passed.\nSo the pass rate is 7/25 = 28%.\nFinal Answer: The final answer is "
     "28\\%. I hope it is correct.", "28\\%", 1.0),
    ("Of 25 students, 7 passed, so the pass rate is 7/25 = 28%.", "28%", 1.0),
    ("Of 25 students, 7 passed.\nTherefore, 28% of the students passed.", "28%", 1.0),
    ("Of 25 students, 7 passed.\nTherefore, 28% of the students passed.", "30%", 0.0),
    ("Solving gives two roots.\nThe solutions are $x = 1$ and $x = -2$.", "-2, 1", 1.0),
])
def test_a_gold_written_as_a_worked_solution_is_read_like_a_response(gold: str, answer: str, expected: float) -> None:
    assert score(f"The answer is {answer}.", gold) == expected


def test_prose_golds_that_state_no_value_stay_as_they_are() -> None:
    for gold in ("No, it is not possible to cover all grid points with such discs.",
                 "Player B has a winning strategy for \\( n \\geq 4 \\)."):
        assert reference_answer(gold) == gold


def test_real_worked_solutions_as_golds(gsm8k: list[dict], math500: list[dict]) -> None:
    """GSM8K's solutions (ending in ``#### N`` or rewritten to end in "So the answer is N.") and MATH-500's
    solutions (their box, or the box taken out and a Minerva closing line added) given as the gold."""
    for i, row in enumerate(gsm8k):
        body, gold = _gsm(row)
        other = _gsm(gsm8k[(i + 1) % len(gsm8k)])[1]
        for written in (row["answer"], f"{body}\nSo the answer is {gold}.", f"{body}\nTherefore {gold} is the answer."):
            assert score(f"The answer is {gold}.", written) == 1.0, written[-80:]
            if other != gold:
                assert score(f"The answer is {other}.", written) == 0.0, written[-80:]
    checked = 0
    for row in math500[:80]:
        solution = row["solution"]
        at = solution.rfind("\\boxed{")
        if at < 0 or solution.count("\\boxed") != 1:
            continue
        boxed = extract(solution)
        assert boxed is not None
        unboxed = solution[:at] + boxed.answers[-1] + solution[at + len("\\boxed{") + len(boxed.answers[-1]) + 1:]
        minerva = f"{unboxed.rstrip()}\nFinal Answer: The final answer is ${boxed.answers[-1]}$. I hope it is correct."
        for written in (solution, minerva):
            assert score(f"The answer is $\\boxed{{{row['answer']}}}$.", written) == 1.0, (row["answer"], written[-80:])
        checked += 1
    assert checked >= 40


# --- 8. hedges without math markup ---------------------------------------------------------------------------------

@pytest.mark.parametrize("response", [
    "It is 18 or 19",
    "so 18 or 19",
    "18 or 19",
    "The answer is 18 or 19.",
    "The number is either 18 or 19.",
    "It's 18, or possibly 19",
    "I think it's 18, or maybe 19.",
    "So the answer must be 18 (or 19).",
    "Either 18 or 19, depending on how we count.",
    "We get $x = 18$ or $x = 19$.",
    "Hence n = 18 or n = 19.",
    "Final Answer: The largest $n$ is 18 or 19.",
    "The answer is \\boxed{19}. Though it could be 18 or 19.",
    "Thus $n = 19$.\n\nSo it is 18 or 19",
])
def test_two_candidates_in_the_closing_sentence_are_a_hedge(response: str) -> None:
    for gold in ("18", "19"):
        verdict = V.check(response, gold, OPTS)
        assert (verdict.status, verdict.score) == (Status.REJECTED, 0.0), (response, gold, verdict.reason)


@pytest.mark.parametrize("response, gold", [
    ("It is 19, or 19.0 written as a decimal.", "19"),  # one value
    ("Only $49$ has a remainder of 1 when divided by 2, 3, 4, or 6.", "49"),  # a condition, not candidates
    ("We get $x = 2$ or $x = 3$.", "2, 3"),  # the roots of a multi-valued gold
    ("The answer is $\\boxed{19}$.\n\nCheck: 19 is odd, so it is not 18 or 20.", "19"),
])
def test_or_that_offers_no_alternative_answer_is_not_a_hedge(response: str, gold: str) -> None:
    assert score(response, gold) == 1.0


def test_closing_alternatives_read_the_closing_sentence_only() -> None:
    assert closing_alternatives("It could be 3 or 4 at first. After checking, the count is 19.") == []
    assert closing_alternatives("Probably 2516_8 (or 40_9).") == ["2516_8", "40_9"]
    assert closing_alternatives("The total is 19 or more.") == []


def test_hedges_on_real_gsm8k_solutions(gsm8k: list[dict]) -> None:
    for row in gsm8k:
        body, gold = _gsm(row)
        wrong = str(int(gold) + 1)
        for closing in (f"It is {gold} or {wrong}", f"so {wrong} or {gold}", f"Probably {gold} (or {wrong})."):
            assert score(f"{body}\n\n{closing}", gold) == 0.0, closing
        assert score(f"{body}\n\nIt is {gold}", gold) == 1.0


# --- the new readers stay linear on floods ------------------------------------------------------------------------

def test_new_readers_are_linear_on_floods() -> None:
    floods = [
        "Final Answer\n" * 30_000,
        "<|im_end|>" * 30_000,
        "<|" * 100_000,
        "User: 1\n" * 30_000,
        "1 or " * 40_000,
        "It is 1 or 2. " * 20_000,
        "=> " * 60_000,
        "\\begin{pmatrix}" * 20_000,
        "1 apple and " * 20_000,
        "Final Answer: The largest " + "n is " * 40_000,
    ]
    for text in floods:  # this thread's CPU time: what the readers cost, not what other processes take meanwhile
        started = time.thread_time()
        extract(text)
        final_statements(text)
        reference_answer(text[:20_000])
        assert time.thread_time() - started < 3, text[:30]
