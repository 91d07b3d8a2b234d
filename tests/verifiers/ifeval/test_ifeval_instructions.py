"""Each instruction type, its edge cases, loose mode, bad references and the offline text statistics."""
from __future__ import annotations

import pytest

from verifiers.kinds.ifeval import CATALOG, IfEvalVerifier
from verifiers.kinds.ifeval.textstats import (
    count_capital_words,
    count_sentences,
    count_words,
    detect_language,
    split_sentences,
)
from verifiers.types import InvalidReference, Status, Verdict

IFEVAL = IfEvalVerifier()


def run(response: str, iid: str, kwargs: dict | None = None, mode: str = "strict") -> Verdict:
    ref = {"instruction_id_list": [iid], "kwargs": [kwargs or {}]}
    return IFEVAL.check(response, ref, IFEVAL.parse_options({"mode": mode}))


def followed(response: str, iid: str, kwargs: dict | None = None, mode: str = "strict") -> bool:
    return run(response, iid, kwargs, mode).details["instructions"][0]["followed"]


LONG_EN = "the quick brown fox jumps over the lazy dog and then runs far away into the green forest"


# (response, id, kwargs, expected) — each IFEval type, both outcomes, and the edge that decides it.
CASES = [
    ("HELLO AND WELCOME TO THE SHOW I SAY", "change_case:capital_word_frequency",
     {"capital_frequency": 8, "capital_relation": "at least"}, True),
    ("HELLO and welcome", "change_case:capital_word_frequency",
     {"capital_frequency": 1, "capital_relation": "less than"}, False),
    ("I'm fine", "change_case:capital_word_frequency",  # "I'm" is "I" + "'m": one capital word
     {"capital_frequency": 1, "capital_relation": "at least"}, True),
    (LONG_EN.upper(), "change_case:english_capital", {}, True),
    (LONG_EN.upper() + " x", "change_case:english_capital", {}, False),
    ("CECI EST UNE PHRASE EN FRANÇAIS AVEC BEAUCOUP DE MOTS POUR QUE LA DÉTECTION SOIT SÛRE",
     "change_case:english_capital", {}, False),
    (LONG_EN, "change_case:english_lowercase", {}, True),
    ("The " + LONG_EN, "change_case:english_lowercase", {}, False),
    ("Write a poem. Here it is: roses", "combination:repeat_prompt", {"prompt_to_repeat": "write a poem."}, True),
    ("Here is a poem", "combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, False),
    ("Answer one\n******\nAnswer two", "combination:two_responses", {}, True),
    ("Same\n******\nSame", "combination:two_responses", {}, False),
    ("A\n******\n\n******\nB", "combination:two_responses", {}, False),  # empty middle answer
    ("******\nA\n******\nB\n******", "combination:two_responses", {}, True),  # empty ends are allowed
    ("Dear [name], at [address]", "detectable_content:number_placeholders", {"num_placeholders": 2}, True),
    ("Dear [name]", "detectable_content:number_placeholders", {"num_placeholders": 2}, False),
    ("Body\n\nP.S. bye", "detectable_content:postscript", {"postscript_marker": "P.S."}, True),
    ("Body\n\np. p. s. later", "detectable_content:postscript", {"postscript_marker": "P.P.S"}, True),
    ("Body without one", "detectable_content:postscript", {"postscript_marker": "P.S."}, False),
    ("Hmm. My answer is maybe.", "detectable_format:constrained_response", {}, True),
    ("My answer is probably yes", "detectable_format:constrained_response", {}, False),
    ('```json\n{"a": 1}\n```', "detectable_format:json_format", {}, True),
    ('Here: {"a": 1}', "detectable_format:json_format", {}, False),
    ("SECTION 1\nfoo\nSECTION 2\nbar", "detectable_format:multiple_sections",
     {"num_sections": 2, "section_spliter": "SECTION"}, True),
    ("Section 1\nfoo\nSection 2\nbar", "detectable_format:multiple_sections",  # case-sensitive splitter
     {"num_sections": 2, "section_spliter": "SECTION"}, False),
    ("* one\n* two\n- three", "detectable_format:number_bullet_lists", {"num_bullets": 3}, True),
    ("* one\n* two\n- three\n**bold** is no bullet", "detectable_format:number_bullet_lists", {"num_bullets": 3},
     True),
    ("* one\n* two", "detectable_format:number_bullet_lists", {"num_bullets": 3}, False),  # exactly, not at least
    ("*one* and **two** and *three*", "detectable_format:number_highlighted_sections", {"num_highlights": 3}, True),
    ("** ** and *one*", "detectable_format:number_highlighted_sections", {"num_highlights": 2}, False),
    ("<<My Title>>\nbody", "detectable_format:title", {}, True),
    ("<< >>\nbody", "detectable_format:title", {}, False),
    ("I love Paris and ROME", "keywords:existence", {"keywords": ["paris", "rome"]}, True),
    ("I love Paris", "keywords:existence", {"keywords": ["paris", "rome"]}, False),
    ("A cathedral", "keywords:forbidden_words", {"forbidden_words": ["cat"]}, True),  # whole words only
    ("A Cat sat", "keywords:forbidden_words", {"forbidden_words": ["cat"]}, False),
    ("dog dog Dog", "keywords:frequency", {"keyword": "dog", "frequency": 3, "relation": "at least"}, True),
    ("dog dog Dog", "keywords:frequency", {"keyword": "dog", "frequency": 3, "relation": "less than"}, False),
    ("Queen quietly quit", "keywords:letter_frequency",
     {"letter": "q", "let_frequency": 3, "let_relation": "at least"}, True),
    ("Queen quietly", "keywords:letter_frequency",
     {"letter": "Q", "let_frequency": 2, "let_relation": "less than"}, False),
    ("Dies ist ein deutscher Satz, der lang genug ist, damit die Erkennung der Sprache sicher funktioniert.",
     "language:response_language", {"language": "de"}, True),
    (LONG_EN, "language:response_language", {"language": "de"}, False),
    ("12345 !!!", "language:response_language", {"language": "de"}, True),  # undetectable counts as followed
    ("Intro here\n\n\"Weekend, plans.\n\nLast", "length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "weekend"}, True),
    ("Intro here\n\nWeekend plans", "length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "weekend"}, False),  # paragraph count must match
    ("one\n***\ntwo\n***\nthree", "length_constraints:number_paragraphs", {"num_paragraphs": 3}, True),
    ("***\none\n***\ntwo\n***", "length_constraints:number_paragraphs", {"num_paragraphs": 2}, True),
    ("one\n***\n***\ntwo", "length_constraints:number_paragraphs", {"num_paragraphs": 2}, False),
    ("One. Two! Three?", "length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"}, True),
    ("Dr. Smith met Mr. Jones. Done.", "length_constraints:number_sentences",
     {"num_sentences": 3, "relation": "less than"}, True),
    ("one two three", "length_constraints:number_words", {"num_words": 3, "relation": "at least"}, True),
    ("one two three", "length_constraints:number_words", {"num_words": 3, "relation": "less than"}, False),
    ("no commas here", "punctuation:no_comma", {}, True),
    ("a, b", "punctuation:no_comma", {}, False),
    ('Text. "Is there anything else I can help with?"', "startend:end_checker",
     {"end_phrase": "Is there anything else I can help with?"}, True),
    ("Is there anything else I can help with? Bye", "startend:end_checker",
     {"end_phrase": "Is there anything else I can help with?"}, False),
    ('  "quoted"  ', "startend:quotation", {}, True),
    ('"', "startend:quotation", {}, False),
]


def test_every_ifeval_type_has_cases() -> None:
    covered = {iid for _, iid, _, _ in CASES}
    ifeval_ids = {i for i in CATALOG if i.split(":")[0] in {
        "change_case", "combination", "detectable_content", "detectable_format", "keywords", "language",
        "length_constraints", "punctuation", "startend"}}
    assert len(covered) == 25
    assert covered <= ifeval_ids


@pytest.mark.parametrize(("response", "iid", "kwargs", "expected"), CASES, ids=[f"{c[1]}-{i}" for i, c in
                                                                                   enumerate(CASES)])
def test_instruction(response: str, iid: str, kwargs: dict, expected: bool) -> None:
    assert followed(response, iid, kwargs) is expected


def test_loose_mode_forgives_wrapper_lines_and_emphasis() -> None:
    response = "Sure, here it is:\nhello world\nLet me know, ok?"
    assert not followed(response, "punctuation:no_comma")
    assert followed(response, "punctuation:no_comma", mode="loose")
    starred = "**My answer is yes.**"
    assert followed(starred, "startend:end_checker", {"end_phrase": "yes."}, mode="loose")
    assert not followed(starred, "startend:end_checker", {"end_phrase": "yes."})


def test_score_is_fraction_in_reference_order() -> None:
    ref = {"instruction_id_list": ["punctuation:no_comma", "startend:quotation", "keywords:existence"],
           "kwargs": [{}, {}, {"keywords": ["cat"]}]}
    v = IFEVAL.check("a cat, sat", ref, IFEVAL.parse_options({}))
    assert v.status is Status.OK
    assert v.score == pytest.approx(1 / 3)
    assert v.details["instructions"] == [
        {"id": "punctuation:no_comma", "followed": False},
        {"id": "startend:quotation", "followed": False},
        {"id": "keywords:existence", "followed": True},
    ]
    assert v.details["all_followed"] is False


def test_hub_style_null_kwargs_and_missing_kwargs_are_accepted() -> None:
    ref = {"instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
           "kwargs": [{"num_words": None, "relation": None}, {"num_words": 2, "relation": "at least",
                                                               "keyword": None}]}
    assert IFEVAL.check("two words", ref, IFEVAL.parse_options({})).score == 1.0
    assert IFEVAL.check("x", {"instruction_id_list": ["punctuation:no_comma"]}, IFEVAL.parse_options({})).score == 1


def test_empty_response_is_no_answer_with_nothing_followed() -> None:
    v = run("   ", "keywords:forbidden_words", {"forbidden_words": ["x"]}, mode="loose")
    assert v.status is Status.NO_ANSWER and v.score == 0.0
    assert v.details["instructions"] == [{"id": "keywords:forbidden_words", "followed": False}]


@pytest.mark.parametrize(("reference", "fragment"), [
    ({"instruction_id_list": ["nope:nothing"], "kwargs": [{}]}, "nope:nothing"),
    ({"instruction_id_list": ["length_constraints:number_words"], "kwargs": [{"num_words": 3}]},
     "length_constraints:number_words"),
    ({"instruction_id_list": ["length_constraints:number_words"],
      "kwargs": [{"num_words": 3, "relation": "about"}]}, "relation"),
    ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"extra": 1}]}, "punctuation:no_comma"),
    ({"instruction_id_list": ["language:response_language"], "kwargs": [{"language": "xx"}]}, "language"),
    ({"instruction_id_list": ["punctuation:no_comma", "startend:quotation"], "kwargs": [{}]}, "one object per"),
    ({"instruction_id_list": []}, "non-empty"),
    ("punctuation:no_comma", "instruction_id_list"),
    ({"instruction_id_list": ["regex:must_match"], "kwargs": [{"pattern": "(unclosed"}]}, "regex:must_match"),
    ({"instruction_id_list": ["detectable_format:valid_json"], "kwargs": [{"schema": {"type": "nonsense"}}]},
     "JSON schema"),
])
def test_bad_reference_is_invalid_reference_naming_the_problem(reference: object, fragment: str) -> None:
    with pytest.raises(InvalidReference, match=fragment.replace("(", r"\(")):
        IFEVAL.check("text", reference, IFEVAL.parse_options({}))


# --- extra constraints ---------------------------------------------------------------------------------------------

SCHEMA = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}


@pytest.mark.parametrize(("response", "iid", "kwargs", "expected"), [
    ('{"name": "x"}', "detectable_format:valid_json", {}, True),
    ("{name: x}", "detectable_format:valid_json", {}, False),
    ('```json\n{"name": "x"}\n```', "detectable_format:valid_json", {"schema": SCHEMA}, True),
    ('{"name": 3}', "detectable_format:valid_json", {"schema": SCHEMA}, False),
    ('{"other": "x"}', "detectable_format:valid_json", {"schema": SCHEMA}, False),
    ("Order #1234 shipped", "regex:must_match", {"pattern": r"#\d{4}\b"}, True),
    ("ORDER shipped", "regex:must_match", {"pattern": "order", "flags": "i"}, True),
    ("ORDER shipped", "regex:must_match", {"pattern": "order"}, False),
    ("As an AI model", "regex:must_not_match", {"pattern": r"(?i)as an ai"}, False),
    ("Fine answer", "regex:must_not_match", {"pattern": r"(?i)as an ai"}, True),
    ("  12345  ", "length_constraints:min_characters", {"num_chars": 5}, True),
    ("1234", "length_constraints:min_characters", {"num_chars": 5}, False),
    ("  12345  ", "length_constraints:max_characters", {"num_chars": 5}, True),
    ("123456", "length_constraints:max_characters", {"num_chars": 5}, False),
    ("# Summary\ntext\n**Risks:** none\n2. Next Steps\ngo", "detectable_format:required_sections",
     {"sections": ["summary", "Risks", "next steps"], "in_order": True}, True),
    ("Summary of the plan is below\nRisks: none", "detectable_format:required_sections",
     {"sections": ["Summary", "Risks"]}, False),  # a sentence starting with the word is no heading
    ("## Risks\nx\n## Summary\ny", "detectable_format:required_sections",
     {"sections": ["Summary", "Risks"], "in_order": True}, False),
    ("## Risks\nx\n## Summary\ny", "detectable_format:required_sections", {"sections": ["Summary", "Risks"]}, True),
    ("As an\n  AI language model, I think", "keywords:forbidden_phrases", {"phrases": ["as an AI"]}, False),
    ("She has an aim", "keywords:forbidden_phrases", {"phrases": ["as an AI"]}, True),
    ("Basically done", "keywords:forbidden_phrases", {"phrases": ["sic"]}, True),
])
def test_extra_constraint(response: str, iid: str, kwargs: dict, expected: bool) -> None:
    assert followed(response, iid, kwargs) is expected


# --- text statistics -----------------------------------------------------------------------------------------------


def test_word_count_is_runs_of_word_characters() -> None:
    assert count_words("Don't stop: 3.5 km, naïve café!") == 8  # Don, t, stop, 3, 5, km, naïve, café


@pytest.mark.parametrize(("text", "n"), [
    ("One sentence only", 1),
    ("Dr. Smith went to Washington. He stayed.", 2),
    ("The U.S. economy grew. Prices rose.", 2),
    ("Wait... really? Yes!", 2),
    ("He said \"why?\" and then left.", 2),
    ("1. first point here.\n2. second point here.", 2),
    ("A heading without a period\n\nParagraph one. Paragraph two.", 2),
    ("Version 2.5 is out. Get it.", 2),
    ("e.g. this one, i.e. that one.", 1),
])
def test_sentence_count(text: str, n: int) -> None:
    assert count_sentences(text) == n, split_sentences(text)


def test_closing_quote_stays_with_its_sentence() -> None:
    assert split_sentences('"Stop." She did.') == ['"Stop."', "She did."]


def test_capital_words_split_contractions_and_punctuation() -> None:
    assert count_capital_words("DON'T PANIC, AT&T (OK)") == 6  # DO, N'T, PANIC, AT, T, OK
    assert count_capital_words("Hello World") == 0


def test_language_detection_is_deterministic() -> None:
    text = "ok ok ok fine"  # short, ambiguous text: unseeded langdetect flips between answers
    assert len({detect_language(text) for _ in range(20)}) == 1
    assert detect_language("1234 !!!") is None


@pytest.mark.parametrize(("text", "n"), [
    ("IT’S *BOLD*", 3),  # curly apostrophe and asterisks are split off: IT, S, BOLD
    ("WE CANNOT.", 3),  # cannot -> can + not
    ("PLAYERS' GAME", 2),
    ("WE'LL SEE", 3),
])
def test_capital_words_follow_nltk_tokenization(text: str, n: int) -> None:
    assert count_capital_words(text) == n
