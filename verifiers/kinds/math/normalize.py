"""String-level normalisation of answers: one canonical spelling per way of writing the same thing.

Everything here is a pure text transform; nothing evaluates. ``canonical`` is the key of the cheapest equivalence
test (two answers with the same canonical form are the same answer), so it only drops what never carries meaning
in a final answer: delimiters, spacing commands, ``\\left``/``\\right``, ``\\dfrac`` vs ``\\frac``, units, degree
and percent signs, a trailing full stop.
"""
from __future__ import annotations

import functools
import re
import unicodedata

_DELIMS = re.compile(r"^\s*(?:\$\$|\$|\\\[|\\\()\s*(.*?)\s*(?:\$\$|\$|\\\]|\\\))\s*$", re.DOTALL)
_SPACING = re.compile(r"(?<!\\)\\[,;:! ]|\\(?:q?quad|displaystyle|textstyle|scriptstyle|mathrm\b(?=\{))|~")
_LEFT_RIGHT = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])\s*")
_FRAC_KIND = re.compile(r"\\[dtc]frac(?![a-zA-Z])")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![a-zA-Z])|\^\s*\{\s*\\text\{\s*o\s*\}\s*\}")
_TEXT_SPACE = re.compile(r"\\(text|mbox|mathrm|textrm|textbf)\s+\{")
_PERCENT = re.compile(r"\\?%")
# Currency signs: "\\$", a leading "$" before a number, a trailing one after it ("2,74 $"), and other signs and codes.
_DOLLAR = re.compile(r"\\\$|^\$(?=\s?\d)|(?<=\d)\s*\$$|[€£¥]|\b(?:USD|EUR|GBP)\b")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mbox|mathbf|operatorname)\s*\{([^{}]*)\}")
_UNIT_WORDS = (
    r"degrees?|deg|radians?|rad|cm|mm|km|m|meters?|metres?|inch(?:es)?|in|feet|foot|ft|yards?|miles?|mph|"
    r"units?|square|sq|cubic|cents?|dollars?|euros?|hours?|hrs?|minutes?|mins?|seconds?|secs?|s|days?|weeks?|"
    r"months?|years?|grams?|g|kg|pounds?|lbs?|ounces?|oz|liters?|litres?|l|ml|gallons?|people|persons?|"
    r"students?|ways?|times|points?|percent|apples?|marbles?|books?|pages?|boxes?|coins?|pieces?|items?"
)
_TRAILING_UNIT = re.compile(
    rf"(?<=[\d\}}\)])\s*(?:\\text\{{\s*(?:{_UNIT_WORDS})\s*\}}|\\mbox\{{\s*(?:{_UNIT_WORDS})\s*\}}|\{{\s*(?:{_UNIT_WORDS})\s*\}}|"
    rf"(?:{_UNIT_WORDS}))"
    rf"(?:\s*\^\s*\{{?[23]\}}?|[23²³](?!\d))?\s*$",  # m^2, and m² (NFKC writes it m2)
    re.IGNORECASE,
)
_TRAILING_PUNCT = re.compile(r"[\s.,;:]+$")  # not "!": it is a factorial
# What a restated problem puts where the answer goes: \phantom{2}, \square, a blank "___", a lone "?".
_PLACEHOLDER = re.compile(r"\\[hv]?phantom\s*\{[^{}]*\}|\\(?:square|Box|underline\{\s*\})(?![A-Za-z])"
                          r"|^\s*(?:_{2,}|\?)\s*$")
_WS = re.compile(r"\s+")
_DOUBLED_COMMAND = re.compile(r"\\\\(?=[A-Za-z])")
_THOUSANDS = re.compile(r"(?<![\d.])([1-9]\d{0,2})((?:,\d{3})+)(?![\d])")


def single_escaped(text: str) -> str:
    """``\\\\text{ and }`` → ``\\text{ and }``: commands escaped twice (a string escaped once more than it needed, as
    data sets and copied test strings carry them). Inside an environment ``\\\\`` breaks rows and is left alone."""
    return text if "\\begin" in text or "\\\\" not in text else _DOUBLED_COMMAND.sub(r"\\", text)


def unwrap(text: str) -> str:
    """Remove math delimiters, markdown emphasis and trailing punctuation around an answer."""
    s = unicodedata.normalize("NFKC", text).strip()
    s = s.replace("\\dollar", "\\$")
    s = re.sub(r"(?<!\\)\\(?=\d)", "", s)  # "\\15": a "\\$15" that lost its "$" (no command starts with a digit)
    s = single_escaped(s)
    for _ in range(3):
        s = s.strip().strip("*").strip()
        m = _DELIMS.match(s)
        if m:
            s = m.group(1)
        s = _TRAILING_PUNCT.sub("", s)
    return s.strip()


def strip_decorations(s: str) -> str:
    """Drop things that never change a final answer's value: spacing, sizing, units, degree/percent/currency signs."""
    s = re.sub(r"\\!\s*", "", s).replace("{,}", ",")
    s = _TEXT_SPACE.sub(r"\\\1{", s)  # "\\text {square inches}" is "\\text{square inches}"
    s = _PLACEHOLDER.sub("", s)
    s = _SPACING.sub(" ", s)
    s = _LEFT_RIGHT.sub("", s)
    s = _FRAC_KIND.sub(r"\\frac", s)
    s = _DEGREES.sub("", s)
    s = _PERCENT.sub("", s)
    s = _DOLLAR.sub("", s)
    for _ in range(2):
        s = _TRAILING_UNIT.sub("", s).strip()
    s = _TRAILING_PUNCT.sub("", s)
    return s.strip()


def text_content(s: str) -> str | None:
    """The words of a pure-text answer (``\\text{Evelyn}``, ``east``, ``(C)``), casefolded; None if it holds math."""
    inner = _TEXT_CMD.sub(r"\1", s).strip()
    inner = inner.strip("()[] ")
    if re.fullmatch(r"[A-J]", inner):  # a multiple-choice letter
        return inner.casefold()
    if re.fullmatch(r"[A-Za-z][A-Za-z\s'\-]*", inner) and (len(inner) > 1 or _TEXT_CMD.search(s) or s.strip() != inner):
        return _WS.sub(" ", inner).casefold()
    if re.fullmatch(r"[A-Za-z][A-Za-z\s'\-]{2,}", inner):
        return _WS.sub(" ", inner).casefold()
    return None


_YES_NO = re.compile(r"(yes|no)(?=$|\s*[,.;:!])")  # "No, ..." and "Yes." but not "No simple solution"
_NO_SUCH = re.compile(
    r"(?:there\s+(?:is|are|exists?)\s+no\b|there\s+(?:do|does|is|are)\s+not\s+exist|it\s+is\s+(?:not\s+possible|"
    r"impossible)|no\s+such\b|(?:such\s+an?\s+\w+\s+)?does\s+not\s+exist)"
)


def polarity(s: str) -> str | None:
    """"yes" or "no" for an answer to a yes/no question ("No, it is not possible ...", "\\text{Yes}", "There exist no
    such polynomials."), else None. Only the opening words count: a later "no" is part of an argument."""
    inner = _WS.sub(" ", _TEXT_CMD.sub(r"\1", s)).strip(" ()[]$*.:").casefold()
    inner = inner.removeprefix("the answer is ").removeprefix("answer: ")
    m = _YES_NO.match(inner)
    if m:
        return m.group(1)
    return "no" if _NO_SUCH.match(inner) else None


@functools.lru_cache(maxsize=16384)  # hedging checks read the same statements several times
def canonical(text: str) -> str:
    """The spelling used for the exact/normalised string test."""
    s = strip_decorations(unwrap(text))
    s = _TEXT_CMD.sub(r"\1", s)
    s = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), s)
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*\{([^{}]*)\}\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt\s*(\d)", r"\\sqrt{\1}", s)
    s = re.sub(r"\^\s*(\w)", r"^{\1}", s)
    s = s.replace("\\cdot", "*").replace("\\times", "*")
    return _WS.sub("", s)


PLAIN_FUNCS = ("arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "sin", "cos", "tan", "cot", "sec", "csc",
                "exp", "log", "ln")


def _brace_call(s: str, name: str, latex: str) -> str:
    """Rewrite ``name(...)`` as ``latex{...}`` with the parentheses matched (``sqrt(1/n)`` → ``\\sqrt{1/n}``)."""
    out, i = [], 0
    pattern = re.compile(rf"(?<![A-Za-z\\]){name}\s*\(")
    while True:
        m = pattern.search(s, i)
        if not m:
            out.append(s[i:])
            return "".join(out)
        depth, j = 1, m.end()
        while j < len(s) and depth:
            depth += {"(": 1, ")": -1}.get(s[j], 0)
            j += 1
        if depth:
            out.append(s[i:])
            return "".join(out)
        out.append(s[i:m.start()] + latex + "{" + _brace_call(s[m.end():j - 1], name, latex) + "}")
        i = j


def plain_to_latex(s: str) -> str:
    """Plain-text math (``-1+exp(16)``, ``pi/2``, ``sqrt(1/n)``, ``x**2``) into LaTeX the LaTeX parser reads.

    Only used on text without backslashes; it rewrites names, never evaluates.
    """
    if "\\" in s:
        return s
    s = s.replace("**", "^").replace("√", "\\sqrt ").replace("π", "\\pi ").replace("∞", "\\infty ")
    s = _brace_call(s, "sqrt", "\\sqrt")
    for name in PLAIN_FUNCS:
        s = re.sub(rf"(?<![A-Za-z\\]){name}(?=\s*\()", rf"\\{name}", s)
    s = re.sub(r"(?<![A-Za-z\\])(?:pi|Pi|PI)(?![A-Za-z])", r"\\pi ", s)
    s = re.sub(r"(?<![A-Za-z\\])(?:infinity|inf|oo)(?![A-Za-z])", r"\\infty ", s)
    s = re.sub(r"\^\s*\(([^()]*)\)", r"^{\1}", s)
    s = re.sub(r"(?<=\d)\s*[eE]\s*([+-]?\d+)(?![\d.])", r"\\times 10^{\1}", s)
    s = s.replace("*", " \\cdot ").replace(">=", "\\geq ").replace("<=", "\\leq ").replace("!=", "\\neq ")
    return s


_QUANT_PREFIX = re.compile(
    r"^\s*(?:\\forall|∀|\\text\{\s*for\s+all\s*\}|for\s+all|for\s+every|\\text\{\s*for\s+every\s*\})\s*"
    r"(?P<cond>[^,;]+?)\s*[,;:]\s*(?P<body>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_QUANT_SUFFIX = re.compile(
    r"^(?P<body>.+?)\s*,?\s*(?:\\(?:q?quad|,|;)\s*)*(?:\\forall|∀|\\text\{\s*(?:for\s+all|for\s+every|for|if|when|where)\s*\}|"
    r"\b(?:for\s+all|for\s+every|for|when|where)\b)\s*(?P<cond>.+)$",
    re.IGNORECASE | re.DOTALL,
)


def split_condition(answer: str) -> tuple[str, str | None]:
    """Separate a quantifier or domain condition (``\\forall x>0, f(x)=0``, ``f(x)=0 for x>0``) from the answer.

    The condition is part of the answer: two answers are equal only when their conditions are too.
    """
    m = _QUANT_PREFIX.match(answer) or _QUANT_SUFFIX.match(answer)
    if m and _open_braces(m.group("body")):  # "for" inside "\text{ for some constant } a": read the words plainly
        flat = _TEXT_CMD.sub(lambda t: f" {t.group(1)} ", answer)
        m = _QUANT_PREFIX.match(flat) or _QUANT_SUFFIX.match(flat)
        if m and _open_braces(m.group("body")):
            m = None
    if not m:
        return answer, None
    return m.group("body").strip(), canonical(m.group("cond")).replace("\\in", "∈")


def _open_braces(text: str) -> bool:
    return text.count("{") - text.count("\\{") != text.count("}") - text.count("\\}")


# A condition that restricts where the answer holds (a relation, an interval, a property), as opposed to one that
# only names the domain or declares a parameter ("for all x \in \mathbb{R}", "for some constant c").
_RESTRICTS = re.compile(
    r"[<>≤≥≠\[\](){}]|\\(?:le|ge|leq|geq|lt|gt|ne|neq|neg|notin|setminus|mid)(?![A-Za-z])|"
    r"odd|even|prime|divisib|not|except|unless|only|multiple|composite|square|cube|when|if",  # spaces are gone here
    re.IGNORECASE,
)
_DOMAIN_SETS = re.compile(r"\\mathbb\{[A-Z]\}|\\mathbb[A-Z]|[ℝℕℤℚℂ]")


def declares_only(condition: str | None) -> bool:
    """Whether a condition (as ``split_condition`` returns it) only names a domain or a parameter."""
    if condition is None:
        return True
    return not _RESTRICTS.search(_DOMAIN_SETS.sub("", condition))


# Commands the LaTeX parser reads; a gold made only of these (and well nested) is a well-formed answer.
_KNOWN_COMMANDS = frozenset(
    "frac dfrac tfrac cfrac sqrt pi infty cdot times div pm mp left right le leq ge geq ne neq lt gt in notin cup "
    "cap setminus emptyset varnothing text textbf textrm mbox mathrm mathbf operatorname begin end sin cos tan cot "
    "sec csc arcsin arccos arctan sinh cosh tanh log ln exp lg circ degree binom dbinom tbinom ldots dots cdots "
    "displaystyle quad qquad mid vert lvert rvert lfloor rfloor lceil rceil overline prime "
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi rho sigma tau "
    "upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega".split()
)
_COMMAND = re.compile(r"\\([A-Za-z]+)")
_EDGE_OP = re.compile(r"(?:^\s*[*/^=,_]|[+\-*/^=,_]\s*$|\\(?:cdot|times|div|frac|sqrt|pm)\s*$)")


def well_formed(answer: str) -> bool:
    """A cheap syntactic check of a gold answer: balanced groups, known commands, no dangling operator.

    Lets an answer identical to the gold be accepted without running the (slow) LaTeX parser on the gold;
    anything this rejects goes through the real parser, whose failure makes the reference invalid.
    """
    s = strip_decorations(unwrap(answer))
    if not s:
        return False
    depth = 0
    prev = ""
    for c in s:
        if c == "{" and prev != "\\":
            depth += 1
        elif c == "}" and prev != "\\":
            depth -= 1
            if depth < 0:
                return False
        prev = c if prev != "\\" else ""
    if depth or s.count("(") + s.count("[") != s.count(")") + s.count("]"):
        return False
    if _EDGE_OP.search(s) or re.search(r"(?:\^|_|\\frac|\\sqrt)\s*\{\s*\}|\{\s*\}\s*$", s):
        return False
    if re.search(r"[+\-*/^=]\s*[*/^=]|\\frac\s*(?:\{[^{}]*\})?\s*(?:$|[^\s{\d\\])", s):
        return False
    return all(m.group(1) in _KNOWN_COMMANDS for m in _COMMAND.finditer(s))


_OTHER_RELATION = re.compile(
    r"[<>≤≥≠≈]|\\(?:le|ge|leq|geq|lt|gt|ne|neq|approx|equiv|sim|simeq|in|notin|subset|subseteq)(?![A-Za-z])"
)


def split_top_level(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` characters outside any bracket or brace (``a = (1, 2), b = 3`` → two parts)."""
    parts, depth, last = [], 0, 0
    for k, c in enumerate(text):
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif c == separator and depth == 0:
            parts.append(text[last:k])
            last = k + 1
    parts.append(text[last:])
    return [p.strip() for p in parts]


def equation_sides(answer: str) -> list[str] | None:
    """The sides of ``name = value`` or of a computation ``\\text{Total} = 20 \\times 2 = 40``, split at the ``=`` of
    the outer level; None when there is no ``=``, another relation, or an empty side."""
    sides = split_top_level(answer, "=")
    if len(sides) < 2 or _OTHER_RELATION.search(answer):
        return None
    sides[0] = sides[0].rstrip(":").strip()  # "x := 5"
    return sides if all(sides) else None


def names_a_quantity(side: str) -> bool:
    """``AB``, ``f(2)``, ``\\cos \\angle RPS``, ``\\text{Total}``: a side with a letter beyond number-writing commands,
    so not itself a number (``4``, ``20 \\times 2``, ``\\frac{1}{2}`` are numbers)."""
    return bool(re.search(r"[A-Za-z]", _NUMERIC_COMMANDS.sub("", side)))


_LONE_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:\\?%)?(?!\w|\.\d)")
_SENTENCE_CHARS = re.compile(r"[\sA-Za-z'’.,:;!?()\-]*")
# Words that make a sentence's one number something other than the answer's value.
_QUALIFIERS = frozenset({
    "not", "no", "never", "except", "without", "cannot", "neither", "nor", "least", "most", "more", "less", "fewer",
    "greater", "over", "under", "above", "below", "than", "nearly", "almost", "beyond", "exceed", "exceeds", "up",
    "between", "per", "times", "plus", "minus", "divided", "squared", "cubed", "root", "or", "and", "wrong",
    "incorrect", "false", "impossible", "invalid", "maybe", "perhaps", "possibly", "probably", "guess", "if", "unless",
    "assume", "assuming", "suppose",
})


_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
                                                     "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100}


def lone_number(answer: str) -> str | None:
    """The one number of a sentence that states it ("Verna received $7.00 in change", "12 tomatoes",
    "40 \\text{ cubic inches}"), or None: several numbers, any math besides the number, a word of one letter (a
    variable), or a qualifier ("at least 7", "not 7", "3 times 4")."""
    s = _TEXT_CMD.sub(r" \1 ", answer).replace("\\$", " ").replace("$", " ").replace("\\,", " ").replace("*", " ")
    s = re.sub(r"[€£¥]", " ", s)
    worded = False
    if not re.search(r"\d", s):  # "five integers", "The answer is twelve."
        all_words = re.findall(r"[A-Za-z]+", s)
        named = [w for w in all_words if w.lower() in _NUMBER_WORDS]
        # only a number that leads ("five integers") or a short statement: "the one with ..." is not 1
        if len(named) == 1 and (all_words[0] == named[0] or len(all_words) <= 2):
            s, worded = re.sub(rf"\b{named[0]}\b", str(_NUMBER_WORDS[named[0].lower()]), s, count=1), True
    numbers = list(_LONE_NUMBER.finditer(s))
    if len(numbers) != 1:
        return None
    m = numbers[0]
    rest = s[:m.start()] + " " + s[m.end():]
    if not _SENTENCE_CHARS.fullmatch(rest):
        return None
    words = re.findall(r"[A-Za-z]+", rest)
    if (not words and not worded) or any(len(w) < 2 for w in words) or any(w.lower() in _QUALIFIERS for w in words):
        return None
    return m.group(0)


# Commands that write numbers, so a side made of them and digits is a constant, not a name.
_NUMERIC_COMMANDS = re.compile(r"\\(?:[dt]?frac|sqrt|pi|cdot|times|div|left|right|circ)(?![A-Za-z])")
_TEXT_GROUP = re.compile(r"\\(?:text\w*|mbox|mathrm|operatorname|begin|end)\s*\{[^{}]*\}")  # words, environments
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")


_UNIT_ITEM = re.compile(r"\s*(?:\\\$\s*)?(-?\d[\d,]*(?:\.\d+)?)\s+[A-Za-z][A-Za-z'\-]*(?:\s+[A-Za-z][A-Za-z'\-]*)?\s*")
_ITEM_GLUE = re.compile(r"\s*(?:,\s*and\b|,|;|\band\b)\s*")


def unit_list(text: str) -> str | None:
    """Quantities each written with its own unit or name ("1 papers and 2 bins", "3 red, 4 blue") as the list of
    their numbers ("1, 2"); None unless every part is a number followed by one or two words."""
    if len(text) > 300:
        return None
    parts = _ITEM_GLUE.split(text.strip().rstrip("."))
    if len(parts) < 2:
        return None
    numbers = []
    for part in parts:
        m = _UNIT_ITEM.fullmatch(part)
        if m is None or any(w.lower() in _QUALIFIERS for w in part.split()):
            return None
        numbers.append(m.group(1))
    return ", ".join(numbers)


def is_prose(answer: str) -> bool:
    """A sentence written as if it were math (``arrived at through careful consideration of …``): three or more
    words outside ``\\text{}`` and command names. The LaTeX parser would read it as a product of letters."""
    return len(_PROSE_WORD.findall(_TEXT_GROUP.sub(" ", answer))) >= 3


_LESS = r"(?:<|≤|\\le(?:q|qslant)?(?![A-Za-z])|\\lt(?![A-Za-z]))"
_CHAIN = re.compile(rf"^\s*(?P<a>[^<>=≤≥]+?)\s*(?P<l>{_LESS})\s*(?P<e>[^<>=≤≥]+?)"
                    rf"\s*(?P<r>{_LESS})\s*(?P<b>[^<>=≤≥]+?)\s*$")
_IN_INTERVAL = re.compile(r"^\s*(?P<e>[^\[\]()]+?(?:\([^()]*\))?)\s*(?:\\in|∈)\s*(?P<i>(?:\\left)?\s*[\[(].*[\])])\s*$")
_BARE_INTERVAL = re.compile(r"^\s*(?:\\left)?\s*[\[(][^,]+,[^,]+[\])]\s*$")


def interval_form(text: str) -> tuple[str | None, str] | None:
    """An answer that places one quantity in an interval, as (its name, the interval): ``0 < f(x) < 1`` →
    (``f(x)``, ``(0, 1)``), ``x \\in [-2, 7]`` → (``x``, ``[-2, 7]``); a bare interval ``(0, 1)`` → (None, it)."""
    m = _CHAIN.match(text)
    if m:
        left = "(" if m.group("l") in ("<", "\\lt") else "["
        right = ")" if m.group("r") in ("<", "\\lt") else "]"
        return canonical(m.group("e")), f"{left}{m.group('a').strip()}, {m.group('b').strip()}{right}"
    m = _IN_INTERVAL.match(text)
    if m:
        return canonical(m.group("e")), m.group("i")
    if _BARE_INTERVAL.match(text):
        return None, text
    return None
