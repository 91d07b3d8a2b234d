"""The ``math`` verifier and Math-Verify on held-out sets of labelled responses written the ways models write them.

ProcessBench (``math_agreement.py``) holds outputs of 12 recent models, whose endings are tidy. These sets take the
golds (and, where there is one, the real worked solution) of MATH-500, GSM8K, AIME 2024 and AMC 2023 from
``../shared/data/math`` and finish each response in one of the styles seen in the wild: every answer marker
(boxes, ``####``, "The answer is", Minerva's "Final Answer:" with or without "the final answer is", bold, headings),
prices in the closing statement, chat-template turn markers and a next turn after the answer, restated problems,
chains of equalities, thousands separators and decimal commas, answers left as an unevaluated sum, golds written as
worked solutions, as several boxes, as sets or with a decimal comma. Each response carries a label: 1 when its final
answer is the gold's value, 0 when it is another value or a hedge (two candidate values in the closing sentence).
Responses and styles are drawn with a fixed seed, so the sets are the same on every run.

Prints, per set, the false positives (scored 1, label 0) and false negatives (not scored 1, label 1) of ``math``
(its defaults, through the worker pool) and of Math-Verify (``parse`` + ``verify`` with its defaults, gold inside
``$…$`` unless it has its own delimiters, as ``math_verify`` does), and with ``--out FILE`` every disagreement.

Run: python benchmarks/math_heldout.py [--workers N] [--out rows.jsonl] [--set NAME]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED_DATA

MATH_DIR = SHARED_DATA / "math"


@dataclass
class Case:
    set: str
    style: str
    response: str
    reference: str
    label: int


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (MATH_DIR / name).read_text().splitlines() if x.strip()]


def available() -> bool:
    return all((MATH_DIR / n).exists() for n in ("math500.test.jsonl", "gsm8k.test.jsonl", "aime24.test.jsonl",
                                                 "amc23.test.jsonl"))


# --- pieces of responses -------------------------------------------------------------------------------------------

# What follows the answer when a server does not stop at the end of the turn: the next turn of a chat template.
CHAT_TAILS = [
    "<|im_end|>\n<|im_start|>user\nThanks! Can you also solve this one: a train travels 120 km in 2 hours. "
    "What is its speed?<|im_end|>",
    "<|im_start|>user\nNext: what is 17 * 3?",
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 25% of 80?<|eot_id|>",
    "<|eot_id|>",
    "</s><s>[INST] Now compute 12 + 30. [/INST]",
    "<|endoftext|>Human: what about 7 times 8?\n\nAssistant: 56",
    "<end_of_turn>\n<start_of_turn>user\nAnd 9 squared?<end_of_turn>",
    "<\uff5cend\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>Find 3 + 4.",
    "<|end|>\n<|user|>\nWhat is 100 divided by 4?<|end|>\n<|assistant|>\n25",
    "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>How many sides does a hexagon have? 6",
    "\n\nUser: great, now what is 2 to the power 10?\nAssistant: 1024",
]

QUANTITIES = ["largest $n$", "smallest possible value", "maximum number of points that can be chosen",
              "value of $x$", "number of ways", "total", "result", "sum of all such $k$", "minimum value of $f$",
              "required number", "length of $AB$", "answer to the problem"]


def _chat_tail(rng: random.Random) -> str:
    return rng.choice(CHAT_TAILS)


def closing(value: str, rng: random.Random, *, money: bool = False) -> tuple[str, str]:
    """A closing statement of ``value`` in one of the styles models write (style name, text). ``value`` is LaTeX
    or a plain number; math-delimited styles wrap it in ``$`` only when it is not a price."""
    q = rng.choice(QUANTITIES)
    dollar = "\\$" if money else ""
    styles = {
        "boxed": f"Therefore, the answer is $\\boxed{{{dollar}{value}}}$.",
        "boxed_display": f"So we get\n\\[\n\\boxed{{{value}}}\n\\]",
        "answer_is": f"The answer is {value}.",
        "answer_is_math": f"So the answer is ${value}$.",
        "minerva": f"Final Answer: The final answer is ${value}$. I hope it is correct.",
        "minerva_sentence": f"Final Answer: The {q} is {value}.",
        "minerva_sentence_math": f"Final Answer: The {q} is ${value}$.",
        "final_answer_colon": f"Final answer: {value}",
        "bold_answer": f"**Answer:** {value}",
        "bold_final": f"**Final Answer**\n\n$\\boxed{{{value}}}$",
        "heading": f"### Final Answer\n\n${value}$",
        "hashes": f"#### {value}",
        "the_q_is": f"Thus, the {q} is ${value}$.",
        "short": f"{value}",
        "ans_colon": f"ans: {value}",
        "arrow": f"=> {value}",
    }
    name = rng.choice(sorted(styles))
    return name, styles[name]


def hedge(a: str, b: str, rng: random.Random) -> tuple[str, str]:
    """Two candidate values in the closing sentence, however they are written (a hedge: label 0)."""
    q = rng.choice(QUANTITIES)
    styles = {
        "plain_or": f"It is {a} or {b}",
        "answer_or": f"The answer is {a} or {b}.",
        "math_or": f"So the {q} is ${a}$ or ${b}$.",
        "either": f"Either {a} or {b}, depending on how we count.",
        "minerva_or": f"Final Answer: The {q} is {a} or {b}.",
        "maybe": f"I think it's {a}, or maybe {b}.",
        "boxed_or": f"$\\boxed{{{a}}}$ or $\\boxed{{{b}}}$",
        "slash_words": f"Probably {a} (or {b}).",
        "short_or": f"{a} or {b}",
    }
    name = rng.choice(sorted(styles))
    return "hedge_" + name, styles[name]


def _restate(problem: str) -> str:
    return f"We are asked: {problem.strip()}\n\n"


def _number_value(text: str) -> Fraction | None:
    try:
        return Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


def _wrong_number(gold: str, rng: random.Random) -> str:
    value = _number_value(gold)
    assert value is not None
    step = rng.choice([1, 2, 10]) if value.denominator == 1 else Fraction(1, 10)
    wrong = value + step * rng.choice([-1, 1])
    if wrong == value:
        wrong += 1
    return str(wrong) if wrong.denominator == 1 else f"{float(wrong):g}"


def _thousands(n: str, rng: random.Random) -> str:
    """An integer as models write it: with "," or "{,}" or a thin space between thousands, or bare."""
    if not re.fullmatch(r"-?\d{4,}", n):
        return n
    return rng.choice([f"{int(n):,}", f"{int(n):,}".replace(",", "{,}"), f"{int(n):,}".replace(",", "\\,"), n])


# --- GSM8K: real worked solutions, finished in every style ------------------------------------------------------

def _gsm_body(answer: str, rng: random.Random) -> tuple[str, str]:
    body, gold = (part.strip() for part in answer.rsplit("####", 1))
    if rng.random() < 0.5:
        body = re.sub(r"<<[^>]*>>", "", body)  # most models do not write the calculator annotations
    return body, gold.replace(",", "")


def gsm8k_set(rng: random.Random, n: int = 150) -> list[Case]:
    rows = _load("gsm8k.test.jsonl")
    picked = rng.sample(range(len(rows)), n)
    out = []
    for k in picked:
        row = rows[k]
        body, gold = _gsm_body(row["answer"], rng)
        money = "$" in row["question"] or "dollar" in row["question"].lower()
        prefix = _restate(row["question"]) if rng.random() < 0.3 else ""
        other_body, other_gold = _gsm_body(rows[(k + 1) % len(rows)]["answer"], rng)
        for label in (1, 1, 0):
            # a wrong response is wrong throughout: another problem's solution, graded against this gold
            value = gold if label else (other_gold if other_gold != gold else _wrong_number(gold, rng))
            shown = _thousands(value, rng)
            if money and rng.random() < 0.5:
                shown_value = f"\\${shown}" if rng.random() < 0.5 else shown
            else:
                shown_value = shown
            style, text = closing(shown_value, rng, money=money and rng.random() < 0.3)
            tail = _chat_tail(rng) if rng.random() < 0.3 else ""
            out.append(Case("gsm8k", style, f"{prefix}{body if label else other_body}\n\n{text}{tail}", gold, label))
        wrong = _wrong_number(gold, rng)
        pair = (gold, wrong) if rng.random() < 0.5 else (wrong, gold)
        style, text = hedge(*pair, rng)
        out.append(Case("gsm8k", style, f"{body}\n\n{text}", gold, 0))
    return out


# --- MATH-500: real solutions, the last box taken out and the answer restated --------------------------------------

def _unboxed(solution: str) -> tuple[str, str] | None:
    """The solution with its last ``\\boxed{X}`` replaced by X, and X."""
    at = solution.rfind("\\boxed{")
    if at < 0:
        return None
    depth, j = 0, at + len("\\boxed")
    for j in range(at + len("\\boxed"), len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[j], 0)
        if depth == 0:
            break
    inner = solution[at + len("\\boxed{"):j]
    return solution[:at] + inner + solution[j + 1:], inner


def math500_set(rng: random.Random, n: int = 150) -> list[Case]:
    rows = _load("math500.test.jsonl")
    picked = rng.sample(range(len(rows)), n)
    out = []
    for k in picked:
        row = rows[k]
        got = _unboxed(row["solution"])
        if got is None:
            continue
        body, _ = got
        gold = row["answer"]
        other = rows[(k + 1) % len(rows)]["answer"]
        other_body = (_unboxed(rows[(k + 1) % len(rows)]["solution"]) or ("", ""))[0]
        prefix = _restate(row["problem"]) if rng.random() < 0.3 else ""
        for label, value in ((1, gold), (1, gold), (0, other)):
            if label == 0 and other.replace(" ", "") == gold.replace(" ", ""):
                continue
            style, text = closing(value, rng)
            tail = _chat_tail(rng) if rng.random() < 0.3 else ""
            out.append(Case("math500", style, f"{prefix}{body if label else other_body}\n\n{text}{tail}", gold, label))
        if "," not in gold and other.replace(" ", "") != gold.replace(" ", ""):
            pair = (gold, other) if rng.random() < 0.5 else (other, gold)
            style, text = hedge(*pair, rng)
            out.append(Case("math500", style, f"{body}\n\n{text}", gold, 0))
    return out


# --- AIME 2024 and AMC 2023: integer answers after a restated problem and short working ----------------------------

def contest_set(rng: random.Random) -> list[Case]:
    out = []
    for name, key in (("aime24.test.jsonl", "problem"), ("amc23.test.jsonl", "question")):
        rows = _load(name)
        for k, row in enumerate(rows):
            raw = row["answer"]
            gold = str(raw)
            value = str(int(float(raw)))
            other = str(int(float(rows[(k + 1) % len(rows)]["answer"])))
            prefix = _restate(row[key]) if rng.random() < 0.5 else ""
            working = rng.choice([
                f"Setting up the equations and simplifying, we obtain ${value}$ after checking every case.",
                f"Let $x$ be the unknown. Then $x = {value} - 0 = {value}$.",
                "Working through the cases carefully and adding them up gives the count.",
                f"Substituting back, the total is ${value}$, which satisfies all the conditions.",
            ])
            for label, shown in ((1, value), (1, value), (0, other)):
                if label == 0 and other == value:
                    continue
                shown_working = working.replace(value, shown) if label == 0 else working
                style, text = closing(shown, rng)
                tail = _chat_tail(rng) if rng.random() < 0.4 else ""
                out.append(Case("aime_amc", style, f"{prefix}{shown_working}\n\n{text}{tail}", gold, label))
            if other != value:
                pair = (value, other) if rng.random() < 0.5 else (other, value)
                style, text = hedge(*pair, rng)
                out.append(Case("aime_amc", style, f"{prefix}{text}", gold, 0))
    return out


# --- short, messy outputs built around the failure classes ----------------------------------------------------------

def _fraction_sum(value: Fraction, rng: random.Random) -> str | None:
    """``value`` as an unevaluated sum of two fractions (``\\frac{1}{2} + \\frac{1}{3}`` for 5/6)."""
    d = rng.choice([2, 3, 4, 5, 6])
    first = Fraction(rng.randint(1, 5), d)
    second = value - first
    if second <= 0:
        return None
    return f"\\frac{{{first.numerator}}}{{{first.denominator}}} + \\frac{{{second.numerator}}}{{{second.denominator}}}"


def _matrix(rows: list[list[int]]) -> str:
    return "\\begin{pmatrix} " + " \\\\ ".join(" & ".join(map(str, r)) for r in rows) + " \\end{pmatrix}"


def wild_set(rng: random.Random) -> list[Case]:
    """Short, messy responses, several styles per case, on golds of the four data sets."""
    gsm = _load("gsm8k.test.jsonl")
    m500 = _load("math500.test.jsonl")
    out: list[Case] = []

    def add(style: str, response: str, gold: str, label: int) -> None:
        out.append(Case("wild", style, response, gold, label))

    for row in rng.sample(gsm, 60):
        _, gold = _gsm_body(row["answer"], rng)
        a = rng.randint(1, int(gold)) if gold.isdigit() and int(gold) > 1 else 1
        b = int(gold) - a if gold.lstrip("-").isdigit() else 0
        wrong = _wrong_number(gold, rng)
        # 1. a chain whose last value is the stated one (a slip inside the chain does not change it)
        slip = int(gold) + rng.choice([-4, 3]) if gold.lstrip("-").isdigit() else 7
        add("chain", f"We add: $x = {a}+{b} = {gold}$", f"x = {gold}", 1)
        add("chain_slip", f"So $x = {a}+{b} = {slip} = {gold}$", f"x = {gold}", 1)
        add("chain_slip_bare", f"Total: $y = {a} + {b} = {slip} = {gold}$.", gold, 1)
        add("chain_wrong_last", f"So $x = {a}+{b} = {gold} = {wrong}$", f"x = {gold}", 0)
        add("chain_other_name", f"So $y = {a}+{b} = {gold}$", f"x = {gold}", 0)
        # 2. Minerva closings without "the final answer is", then the next turn of a chat template
        q = rng.choice(QUANTITIES)
        add("minerva_sentence_tail", f"Final Answer: The {q} is {_thousands(gold, rng)}.{_chat_tail(rng)}", gold, 1)
        add("minerva_sentence_wrong", f"Final Answer: The {q} is {wrong}.{_chat_tail(rng)}", gold, 0)
        # 3. prices in the closing statement
        if gold.isdigit() and int(gold) > 10:
            g = int(gold)
            p1 = rng.randint(1, g - 1)
            add("currency_minerva", f"${p1:,} + ${g - p1:,} = ${g:,}. Final Answer: The final answer is ${g:,}$.",
                gold, 1)
            add("currency_minerva_hope", f"He pays ${p1:,} + ${g - p1:,} = ${g:,}.\nFinal Answer: The final "
                f"answer is ${g:,}. I hope it is correct.", gold, 1)
            add("currency_total", f"Total cost: ${p1:,} + ${g - p1:,} = ${g:,}", gold, 1)
            add("currency_wrong", f"${p1:,} + ${g - p1:,} = ${g + 5:,}. Final Answer: The final answer is "
                f"${g + 5:,}$.", gold, 0)
        # 8. hedges without math markup
        pair = (gold, wrong) if rng.random() < 0.5 else (wrong, gold)
        add("hedge_plain", f"It is {pair[0]} or {pair[1]}", gold, 0)
        add("hedge_answer", f"The answer is {pair[0]} or {pair[1]}.", gold, 0)
        add("hedge_so", f"so {pair[0]} or {pair[1]}", gold, 0)
        add("plain_one", f"It is {gold}", gold, 1)

    # 4. sets written several ways; 5. decimal commas in golds; 6. unevaluated answers; 7. worked-solution golds
    multi = [r for r in m500 if re.fullmatch(r"-?[\w\\]+(?:\{\w+\})*(?:\s*,\s*-?[\w\\]+(?:\{\w+\})*)+", r["answer"])]
    for row in multi:
        parts = [p.strip() for p in row["answer"].split(",")]
        rev = ", ".join(reversed(parts))
        boxes = " and ".join(f"$\\boxed{{{p}}}$" for p in parts)
        add("two_boxes_gold", f"The solutions are $\\boxed{{{rev}}}$.", boxes, 1)
        add("two_boxes_gold_bare", f"So $x \\in \\boxed{{{rev}}}$", " and ".join(f"\\boxed{{{p}}}" for p in parts), 1)
        add("two_boxes_gold_partial", f"The solution is $\\boxed{{{parts[0]}}}$.", boxes, 0)
        add("set_gold_paren_answer", f"The solutions are $({rev})$.", f"\\{{{row['answer']}\\}}", 1)
        add("set_gold_brace_answer", f"The solutions are $\\{{{rev}\\}}$.", f"\\{{{row['answer']}\\}}", 1)
        add("set_gold_partial", f"The solutions are $({parts[0]})$.", f"\\{{{row['answer']}\\}}", 0)
    for lo, hi in ((1, 3), (2, 5), (-1, 4)):
        add("interval_gold_set_answer", f"The answer is $\\{{{lo}, {hi}\\}}$.", f"({lo}, {hi})", 0)
        add("interval_gold_closed", f"The answer is $[{lo}, {hi}]$.", f"({lo}, {hi})", 0)
        add("set_gold_paren", f"The answer is $({lo},{hi})$.", f"\\{{{lo},{hi}\\}}", 1)
        add("set_gold_plain_braces", f"The answer is $\\boxed{{({hi},{lo})}}$.", f"{{{lo},{hi}}}", 1)
        add("point_gold", f"The answer is $\\{{{lo}, {hi}\\}}$.", f"({lo}, {hi})", 0)
    for papers, bins in ((1, 2), (3, 5), (4, 7)):
        add("units_list_response", f"The answer is {papers} papers and {bins} bins.", f"{papers}, {bins}", 1)
        add("units_list_gold", f"The answer is $\\boxed{{{papers}, {bins}}}$.", f"{papers} papers and {bins} bins", 1)
        add("units_list_wrong", f"The answer is {papers} papers and {bins + 1} bins.", f"{papers}, {bins}", 0)
        add("units_list_one_gold", f"The answer is {papers} papers and {bins} bins.", f"{bins}", 0)
    # "7,125" is a thousands separator by the rule (three digits after a nonzero digit): no decimal gold of that shape
    decimals = sorted(d for d in {r["answer"] for r in m500 if re.fullmatch(r"-?\d+\.\d+", r["answer"])}
                      | {str(a) for a in (1.22, 0.111, 2.74, 3.5, 0.25, 12.05, 0.375)}
                      if not re.fullmatch(r"-?[1-9]\d*\.\d{3}", d))
    for gold in decimals:
        comma = gold.replace(".", ",")
        add("decimal_comma_gold", f"The answer is $\\boxed{{{gold}}}$.", comma, 1)
        add("decimal_comma_gold_currency", f"So the price is \\${gold}.", f"{comma} $", 1)
        add("decimal_comma_gold_euro", f"Final Answer: The final answer is ${gold}$.", f"{comma} €", 1)
        add("decimal_comma_gold_wrong", f"The answer is $\\boxed{{{gold.replace('.', '')}}}$.", comma, 0)
        add("decimal_comma_gold_other", f"The answer is $\\boxed{{{float(gold) + 1:g}}}$.", comma, 0)
    for gold in ("1,000", "12,345", "2,500", "1,234,567"):
        plain = gold.replace(",", "")
        add("thousands_gold", f"The answer is {plain}.", gold, 1)
        add("thousands_gold_decimal", f"The answer is {plain[:-3]}.{plain[-3:]}.", gold, 0)
    for row in rng.sample([r for r in m500 if re.fullmatch(r"\\frac\{\d+\}\{\d+\}", r["answer"])], 12):
        num, den = map(int, re.findall(r"\d+", row["answer"]))
        expr = _fraction_sum(Fraction(num, den), rng)
        if expr:
            add("unevaluated_sum", f"The sum is ${expr}$.", row["answer"], 1)
            add("unevaluated_sum_wrong", f"The sum is ${expr} + 1$.", row["answer"], 0)
    for _ in range(8):
        a = [[rng.randint(-5, 9) for _ in range(2)] for _ in range(2)]
        b = [[rng.randint(-5, 9) for _ in range(2)] for _ in range(2)]
        total = [[a[i][j] + b[i][j] for j in range(2)] for i in range(2)]
        off = [[total[0][0] + 1, total[0][1]], total[1]]
        add("matrix_sum", f"The sum is ${_matrix(a)} + {_matrix(b)}$.", _matrix(total), 1)
        add("matrix_sum_wrong", f"The sum is ${_matrix(a)} + {_matrix(b)}$.", _matrix(off), 0)
        add("matrix_difference", f"So $A - B = {_matrix(total)} - {_matrix(b)}$.", _matrix(a), 1)
    for row in rng.sample(m500, 40):
        if not _unboxed(row["solution"]):
            continue
        other = m500[(m500.index(row) + 7) % len(m500)]["answer"]
        add("solution_gold_boxed", f"The answer is ${row['answer']}$.", row["solution"], 1)
        add("solution_gold_boxed_wrong", f"The answer is ${other}$.", row["solution"], 0 if other != row["answer"]
            else 1)
        body, inner = _unboxed(row["solution"])  # type: ignore[misc]
        add("solution_gold_closing", f"\\boxed{{{row['answer']}}}",
            f"{body.rstrip()}\nFinal Answer: The final answer is ${inner}$. I hope it is correct.", 1)
    for row in rng.sample(gsm, 30):
        body, gold = _gsm_body(row["answer"], rng)
        add("solution_gold_hashes", f"The answer is {gold}.", row["answer"], 1)
        add("solution_gold_sentence", f"#### {gold}", f"{body}\nSo the answer is {gold}.", 1)
        pct_body = f"{body}\nThat is $\\boxed{{{gold}\\%}}$ of the total."
        add("solution_gold_percent", f"The answer is {gold}%.", pct_body, 1)
        add("solution_gold_sentence_wrong", f"#### {_wrong_number(gold, rng)}", f"{body}\nSo the answer is {gold}.",
            0)
    return out


def build(seed: int = 20261124) -> dict[str, list[Case]]:
    rng = random.Random(seed)
    sets = {"gsm8k": gsm8k_set(rng), "math500": math500_set(rng), "aime_amc": contest_set(rng), "wild": wild_set(rng)}
    return sets


# --- grading -------------------------------------------------------------------------------------------------------

_DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed")


def mv_case(pair: tuple[str, str]) -> bool:
    """Math-Verify with its defaults and its own timeouts, the gold as ``math_verify`` reads it."""
    import logging

    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    response, reference = pair
    try:
        gold = parse(reference if _DELIMITED.search(reference) else f"${reference}$")
        return bool(gold) and bool(verify(gold, parse(response)))
    except Exception:
        return False


def mv_all(cases: list[Case], workers: int) -> list[bool]:
    with multiprocessing.get_context("spawn").Pool(workers) as mp:
        return mp.map(mv_case, [(c.response, c.reference) for c in cases], chunksize=8)


async def ours_all(cases: list[Case], workers: int, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    from verifiers.engine.pool import WorkerPool

    pool = WorkerPool(workers, ["verifiers.kinds.math.verifier"])
    await pool.start()
    try:
        window = asyncio.Semaphore(workers * 64)

        async def one(case: Case) -> Any:
            async with window:
                return await pool.run("math", case.response, case.reference, {}, timeout_s)

        verdicts = await asyncio.gather(*(one(c) for c in cases))
    finally:
        await pool.close()
    return [{"score": v.score, "status": v.status.value, "reason": v.reason[:200],
             "extracted": v.details.get("extracted")} for v in verdicts]


def tally(cases: list[Case], says: list[bool]) -> dict[str, Counter[str]]:
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for ok, case in zip(says, cases):
        if ok and not case.label:
            fp[case.set] += 1
        if not ok and case.label:
            fn[case.set] += 1
    return {"fp": fp, "fn": fn}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, help="Write every row where a verifier and the label disagree.")
    parser.add_argument("--set", help="Only this set.")
    args = parser.parse_args()
    if not available():
        print(f"skipped: the data sets under {MATH_DIR} are absent")
        return
    sets = build()
    cases = [c for name, cs in sets.items() if args.set in (None, name) for c in cs]
    ours = asyncio.run(ours_all(cases, args.workers))
    mv = mv_all(cases, args.workers)
    ours_ok = [o["score"] == 1.0 for o in ours]
    mine, other = tally(cases, ours_ok), tally(cases, mv)
    print(f"{len(cases)} labelled responses; FP = scored 1 with label 0, FN = not scored 1 with label 1")
    print(f"{'set':<12}{'n':>6}{'right':>7}  {'ours FP':>8}{'ours FN':>8}  {'MV FP':>7}{'MV FN':>7}")
    names = [n for n in sets if args.set in (None, n)]
    for name in (*names, None):
        n = sum(1 for c in cases if name is None or c.set == name)
        right = sum(c.label for c in cases if name is None or c.set == name)

        def count(c: Counter[str], name: str | None = name) -> int:
            return sum(c.values()) if name is None else c[name]

        print(f"{name or 'total':<12}{n:>6}{right:>7}  {count(mine['fp']):>8}{count(mine['fn']):>8}  "
              f"{count(other['fp']):>7}{count(other['fn']):>7}")
    if args.out:
        with args.out.open("w") as f:
            for case, o, a, b in zip(cases, ours, ours_ok, mv):
                if a == b == bool(case.label):
                    continue
                f.write(json.dumps({**asdict(case), "ours": o, "math_verify": b}) + "\n")
        print(f"disagreement rows written to {args.out}")


if __name__ == "__main__":
    main()
