"""IFEval's 25 instruction types, with the reference checker's semantics (google-research instruction_following_eval).

Each check takes the response and validated kwargs and says whether the instruction was followed. Where the
reference's behaviour is surprising it is kept on purpose (agreement with published numbers is the contract) and
noted next to the code.
"""
from __future__ import annotations

import json
import re
from collections import Counter

from pydantic import Field, field_validator

from verifiers.kinds.ifeval.catalog import Instruction, Kwargs, NoKwargs, Relation, compare
from verifiers.kinds.ifeval.textstats import (
    count_capital_words,
    count_sentences,
    count_words,
    detect_language,
    supported_languages,
)


def keyword_pattern(keyword: str) -> re.Pattern[str]:
    """The reference searches keywords as regular expressions; one that is not a valid regex is taken literally."""
    try:
        return re.compile(keyword, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(keyword), re.IGNORECASE)


# --- change_case ---------------------------------------------------------------------------------------------------


class CapitalFrequency(Kwargs):
    capital_frequency: int = Field(ge=0)
    capital_relation: Relation


def capital_word_frequency(text: str, kw: CapitalFrequency) -> bool:
    return compare(count_capital_words(text), kw.capital_relation, kw.capital_frequency)


def _in_english(text: str) -> bool:
    # The reference counts an undetectable language as followed (it logs and returns True).
    lang = detect_language(text)
    return lang is None or lang == "en"


def english_capital(text: str, kw: NoKwargs) -> bool:
    return text.isupper() and _in_english(text)


def english_lowercase(text: str, kw: NoKwargs) -> bool:
    return text.islower() and _in_english(text)


# --- combination ---------------------------------------------------------------------------------------------------


class RepeatPrompt(Kwargs):
    prompt_to_repeat: str = Field(min_length=1)


def repeat_prompt(text: str, kw: RepeatPrompt) -> bool:
    return text.strip().lower().startswith(kw.prompt_to_repeat.strip().lower())


def two_responses(text: str, kw: NoKwargs) -> bool:
    parts = text.split("******")
    kept = []
    for i, part in enumerate(parts):
        if part.strip():
            kept.append(part.strip())
        elif 0 < i < len(parts) - 1:  # an empty answer between two separators
            return False
    return len(kept) == 2 and kept[0] != kept[1]


# --- detectable_content --------------------------------------------------------------------------------------------


class Placeholders(Kwargs):
    num_placeholders: int = Field(ge=0)


def number_placeholders(text: str, kw: Placeholders) -> bool:
    return len(re.findall(r"\[.*?\]", text)) >= kw.num_placeholders


class Postscript(Kwargs):
    postscript_marker: str = Field(min_length=1)


def postscript(text: str, kw: Postscript) -> bool:
    marker = kw.postscript_marker
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:  # the reference splices the marker into the regex unescaped; escaping keeps odd markers literal
        pattern = r"\s*" + re.escape(marker.lower()) + r".*$"
    return re.search(pattern, text.lower(), flags=re.MULTILINE) is not None


# --- detectable_format ---------------------------------------------------------------------------------------------

CONSTRAINED_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def constrained_response(text: str, kw: NoKwargs) -> bool:
    text = text.strip()
    return any(option in text for option in CONSTRAINED_OPTIONS)


def strip_code_fence(text: str) -> str:
    """The reference's JSON unwrapping: a ```json / ```Json / ```JSON / ``` fence around the whole answer."""
    text = text.strip()
    for prefix in ("```json", "```Json", "```JSON", "```"):
        text = text.removeprefix(prefix)
    return text.removesuffix("```").strip()


def json_format(text: str, kw: NoKwargs) -> bool:
    try:
        json.loads(strip_code_fence(text))
    except ValueError:
        return False
    return True


class Sections(Kwargs):
    num_sections: int = Field(ge=0)
    section_spliter: str = Field(min_length=1)


def multiple_sections(text: str, kw: Sections) -> bool:
    # Case-sensitive, like the reference: "Section 1" does not count for "SECTION".
    pattern = r"\s?" + re.escape(kw.section_spliter.strip()) + r"\s?\d+\s?"
    return len(re.split(pattern, text)) - 1 >= kw.num_sections


class Bullets(Kwargs):
    num_bullets: int = Field(ge=0)


def number_bullet_lists(text: str, kw: Bullets) -> bool:
    stars = re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    return len(stars) + len(dashes) == kw.num_bullets


class Highlights(Kwargs):
    num_highlights: int = Field(ge=0)


def number_highlighted_sections(text: str, kw: Highlights) -> bool:
    count = sum(1 for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip())
    count += sum(1 for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h[2:-2].strip())
    return count >= kw.num_highlights


def title(text: str, kw: NoKwargs) -> bool:
    return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", text))


# --- keywords ------------------------------------------------------------------------------------------------------


class Keywords(Kwargs):
    keywords: list[str] = Field(min_length=1)


def existence(text: str, kw: Keywords) -> bool:
    return all(keyword_pattern(k).search(text) for k in kw.keywords)


class Forbidden(Kwargs):
    forbidden_words: list[str] = Field(min_length=1)


def forbidden_words(text: str, kw: Forbidden) -> bool:
    return not any(
        re.search(r"\b" + re.escape(w) + r"\b", text, flags=re.IGNORECASE) for w in kw.forbidden_words
    )


class Frequency(Kwargs):
    keyword: str = Field(min_length=1)
    frequency: int = Field(ge=0)
    relation: Relation


def frequency(text: str, kw: Frequency) -> bool:
    return compare(len(keyword_pattern(kw.keyword).findall(text)), kw.relation, kw.frequency)


class LetterFrequency(Kwargs):
    letter: str = Field(min_length=1, max_length=1)
    let_frequency: int = Field(ge=0)
    let_relation: Relation


def letter_frequency(text: str, kw: LetterFrequency) -> bool:
    return compare(Counter(text.lower())[kw.letter.lower()], kw.let_relation, kw.let_frequency)


# --- language ------------------------------------------------------------------------------------------------------


class Language(Kwargs):
    language: str

    @field_validator("language")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in supported_languages():
            raise ValueError(f"language {value!r} is not one langdetect knows: {sorted(supported_languages())}")
        return value


def response_language(text: str, kw: Language) -> bool:
    lang = detect_language(text)
    return lang is None or lang == kw.language


# --- length_constraints --------------------------------------------------------------------------------------------


class NthParagraph(Kwargs):
    num_paragraphs: int = Field(ge=1)
    nth_paragraph: int = Field(ge=1)
    first_word: str = Field(min_length=1)


def nth_paragraph_first_word(text: str, kw: NthParagraph) -> bool:
    paragraphs = re.split(r"\n\n", text)
    count = sum(1 for p in paragraphs if p.strip())
    # Like the reference, the n-th paragraph is indexed among *all* chunks, empty ones included.
    if kw.nth_paragraph > count:
        return False
    paragraph = paragraphs[kw.nth_paragraph - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    first = ""
    for ch in word:
        if ch in ".,?!'\"":
            break
        first += ch.lower()
    return count == kw.num_paragraphs and first == kw.first_word.lower()


class Paragraphs(Kwargs):
    num_paragraphs: int = Field(ge=0)


def number_paragraphs(text: str, kw: Paragraphs) -> bool:
    parts = re.split(r"\s?\*\*\*\s?", text)
    count = len(parts)
    for i, part in enumerate(parts):
        if not part.strip():
            if i in (0, len(parts) - 1):
                count -= 1
            else:  # two separators with nothing between them
                return False
    return count == kw.num_paragraphs


class Sentences(Kwargs):
    num_sentences: int = Field(ge=0)
    relation: Relation


def number_sentences(text: str, kw: Sentences) -> bool:
    return compare(count_sentences(text), kw.relation, kw.num_sentences)


class Words(Kwargs):
    num_words: int = Field(ge=0)
    relation: Relation


def number_words(text: str, kw: Words) -> bool:
    return compare(count_words(text), kw.relation, kw.num_words)


# --- punctuation / startend ----------------------------------------------------------------------------------------


def no_comma(text: str, kw: NoKwargs) -> bool:
    return "," not in text


class EndPhrase(Kwargs):
    end_phrase: str = Field(min_length=1)


def end_checker(text: str, kw: EndPhrase) -> bool:
    return text.strip().strip('"').lower().endswith(kw.end_phrase.strip().lower())


def quotation(text: str, kw: NoKwargs) -> bool:
    text = text.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


IFEVAL_INSTRUCTIONS: list[Instruction] = [
    Instruction("change_case:capital_word_frequency", CapitalFrequency, capital_word_frequency,
                "Count of all-capital words compared with capital_frequency."),
    Instruction("change_case:english_capital", NoKwargs, english_capital, "Whole response in English capitals."),
    Instruction("change_case:english_lowercase", NoKwargs, english_lowercase, "Whole response in English lower case."),
    Instruction("combination:repeat_prompt", RepeatPrompt, repeat_prompt, "Starts by repeating the request."),
    Instruction("combination:two_responses", NoKwargs, two_responses, "Two different answers separated by ******."),
    Instruction("detectable_content:number_placeholders", Placeholders, number_placeholders,
                "At least num_placeholders [placeholders]."),
    Instruction("detectable_content:postscript", Postscript, postscript, "A postscript starting with the marker."),
    Instruction("detectable_format:constrained_response", NoKwargs, constrained_response,
                "Contains 'My answer is yes.', '... no.' or '... maybe.'."),
    Instruction("detectable_format:json_format", NoKwargs, json_format, "The whole answer is JSON (fences allowed)."),
    Instruction("detectable_format:multiple_sections", Sections, multiple_sections,
                "At least num_sections sections marked '<spliter> <n>'."),
    Instruction("detectable_format:number_bullet_lists", Bullets, number_bullet_lists,
                "Exactly num_bullets markdown bullets (* or -)."),
    Instruction("detectable_format:number_highlighted_sections", Highlights, number_highlighted_sections,
                "At least num_highlights *highlighted* spans."),
    Instruction("detectable_format:title", NoKwargs, title, "A title in double angular brackets <<title>>."),
    Instruction("keywords:existence", Keywords, existence, "Every keyword appears (case-insensitive)."),
    Instruction("keywords:forbidden_words", Forbidden, forbidden_words, "No forbidden word appears as a word."),
    Instruction("keywords:frequency", Frequency, frequency, "Keyword occurrences compared with frequency."),
    Instruction("keywords:letter_frequency", LetterFrequency, letter_frequency,
                "Occurrences of a letter compared with let_frequency."),
    Instruction("language:response_language", Language, response_language, "The response is in the language."),
    Instruction("length_constraints:nth_paragraph_first_word", NthParagraph, nth_paragraph_first_word,
                "num_paragraphs paragraphs (blank-line separated); the nth starts with first_word."),
    Instruction("length_constraints:number_paragraphs", Paragraphs, number_paragraphs,
                "Exactly num_paragraphs paragraphs separated by ***."),
    Instruction("length_constraints:number_sentences", Sentences, number_sentences,
                "Sentence count compared with num_sentences."),
    Instruction("length_constraints:number_words", Words, number_words, "Word count compared with num_words."),
    Instruction("punctuation:no_comma", NoKwargs, no_comma, "No comma anywhere."),
    Instruction("startend:end_checker", EndPhrase, end_checker, "Ends with the exact end_phrase."),
    Instruction("startend:quotation", NoKwargs, quotation, "Whole response wrapped in double quotes."),
]
