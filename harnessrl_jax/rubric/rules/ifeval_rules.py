"""IFEval's 25 instructions, re-implemented with its ids, kwargs and counting rules so verdicts agree with it.

Reference: Zhou et al. 2023, "Instruction-Following Evaluation for Large Language Models" (IFEval), and the
counting rules of its public evaluation code. Quirks of those rules are kept on purpose, and stated in each
docstring: e.g. `keywords:frequency` counts substrings ('war' in 'software'), keywords are regular expressions.
"""

from __future__ import annotations

import collections
import functools
import json
import re
from typing import Annotated

from harnessrl_jax.rubric.rules import text
from harnessrl_jax.rubric.rules.registry import KwargError, Relation, Text, compare, register


@functools.lru_cache(maxsize=4096)
def _pattern(user: str, flags: int = re.IGNORECASE, template: str = "{}") -> re.Pattern:
    """template with the user's regular expression in it, compiled; a user regex that does not compile (IFEval
    would crash on it) is put in as literal text."""
    try:
        return re.compile(template.replace("{}", user), flags)
    except re.error:
        return re.compile(template.replace("{}", re.escape(user)), flags)


def _single_char(value: str) -> None:
    if len(value.strip()) != 1:
        raise ValueError(f"must be a single non-whitespace character, got {value!r}")


def _language(value: str) -> None:
    if value not in text.language_codes():
        raise ValueError(f"must be a langdetect language code ({', '.join(text.language_codes())}), got {value!r}")


# --- keywords ---------------------------------------------------------------------------------------------------

@register("keywords:existence", ifeval=True)
def keywords_existence(response, *, keywords: list[str]) -> bool:
    """Every keyword occurs in the response, ignoring case, anywhere (also inside longer words).

    As in IFEval each keyword is a regular expression (a plain word matches itself); one that is not a valid
    regular expression is matched literally.
    """
    return all(_pattern(k).search(response) for k in keywords)


@register("keywords:frequency", ifeval=True)
def keywords_frequency(response, *, keyword: Text, frequency: int, relation: Relation) -> bool:
    """The number of non-overlapping, case-insensitive matches of `keyword` (stripped; a regular expression, as in
    IFEval) is `relation` `frequency`. Matches inside longer words count: 'war' occurs once in 'software'."""
    return compare(len(_pattern(keyword.strip()).findall(response)), relation, frequency)


@register("keywords:forbidden_words", ifeval=True)
def keywords_forbidden_words(response, *, forbidden_words: list[str]) -> bool:
    """No forbidden word occurs as a whole word (between regex word boundaries \\b), ignoring case."""
    return not any(_pattern(w, template=r"\b{}\b").search(response) for w in forbidden_words)


@register("keywords:letter_frequency", ifeval=True)
def keywords_letter_frequency(response, *, letter: Annotated[str, _single_char], let_frequency: int,
                              let_relation: Relation) -> bool:
    """The number of occurrences of the character `letter` in the lowercased response (letter lowercased too) is
    `let_relation` `let_frequency`. Any single character is allowed, e.g. '#' or '!'."""
    return compare(collections.Counter(response.lower())[letter.strip().lower()], let_relation, let_frequency)


# --- language and case ------------------------------------------------------------------------------------------

@register("language:response_language", ifeval=True)
def response_language(response, *, language: Annotated[str, _language]) -> bool:
    """langdetect (seeded at 0) identifies the whole response as `language` (an ISO 639-1 code such as 'en', 'kn';
    'zh-cn', 'zh-tw' for Chinese). A response langdetect cannot classify (no letters) passes, as in IFEval."""
    found = text.detect_language(response)
    return found is None or found == language


@register("change_case:english_capital", ifeval=True)
def english_capital(response) -> bool:
    """The response has cased letters, none of them lowercase (str.isupper), and langdetect reads it as English
    (or cannot classify it)."""
    return response.isupper() and text.detect_language(response) in ("en", None)


@register("change_case:english_lowercase", ifeval=True)
def english_lowercase(response) -> bool:
    """The response has cased letters, none of them uppercase (str.islower), and langdetect reads it as English
    (or cannot classify it)."""
    return response.islower() and text.detect_language(response) in ("en", None)


@register("change_case:capital_word_frequency", ifeval=True)
def capital_word_frequency(response, *, capital_frequency: int, capital_relation: Relation) -> bool:
    """The number of all-capital tokens (str.isupper) among nltk.word_tokenize's tokens is `capital_relation`
    `capital_frequency`. Hyphenated words are one token; 'I' and 'A' count."""
    n = sum(t.isupper() for t in text.word_tokens(response))
    return compare(n, capital_relation, capital_frequency)


# --- length -----------------------------------------------------------------------------------------------------

@register("length_constraints:number_words", ifeval=True)
def number_words(response, *, num_words: int, relation: Relation) -> bool:
    """The number of words, i.e. runs of \\w characters ('co-op' is two, "don't" is two), is `relation`
    `num_words`."""
    return compare(text.count_words(response), relation, num_words)


@register("length_constraints:number_sentences", ifeval=True)
def number_sentences(response, *, num_sentences: int, relation: Relation) -> bool:
    """The number of sentences NLTK's English Punkt model finds is `relation` `num_sentences`."""
    return compare(text.count_sentences(response), relation, num_sentences)


@register("length_constraints:number_paragraphs", ifeval=True)
def number_paragraphs(response, *, num_paragraphs: int) -> bool:
    """Exactly `num_paragraphs` paragraphs separated by the markdown divider `***` (with at most one whitespace
    character either side taken into the divider). A blank first or last part is ignored; a blank part between two
    dividers fails the rule."""
    parts = re.split(r"\s?\*\*\*\s?", response)
    count = len(parts)
    for i, part in enumerate(parts):
        if not part.strip():
            if 0 < i < len(parts) - 1:
                return False
            count -= 1
    return count == num_paragraphs


def _nth_paragraph_kwargs(kw: dict) -> None:
    if not 1 <= kw["nth_paragraph"] <= kw["num_paragraphs"]:
        raise KwargError("nth_paragraph", f"must be in [1, num_paragraphs={kw['num_paragraphs']}], "
                                          f"got {kw['nth_paragraph']}")


@register("length_constraints:nth_paragraph_first_word", ifeval=True, validate=_nth_paragraph_kwargs)
def nth_paragraph_first_word(response, *, num_paragraphs: int, nth_paragraph: int, first_word: Text) -> bool:
    """Exactly `num_paragraphs` non-blank paragraphs separated by '\\n\\n', and paragraph `nth_paragraph` (1-based,
    counted over the raw '\\n\\n' split, blank parts included, as IFEval does) starts with `first_word`, ignoring case.
    The first word is the first whitespace-separated token with leading ' then " stripped, cut at the first of
    . , ? ! ' "."""
    parts = response.split("\n\n")
    count = sum(1 for p in parts if p.strip())
    if nth_paragraph > count:
        return False
    paragraph = parts[nth_paragraph - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].lstrip("'").lstrip('"')
    first = []
    for ch in word:
        if ch in ".,?!'\"":
            break
        first.append(ch.lower())
    return count == num_paragraphs and "".join(first) == first_word.lower()


# --- detectable content -----------------------------------------------------------------------------------------

@register("detectable_content:number_placeholders", ifeval=True)
def number_placeholders(response, *, num_placeholders: int) -> bool:
    """At least `num_placeholders` square-bracket placeholders such as [address] (shortest '[...]' spans on one
    line or across lines)."""
    return len(re.findall(r"\[.*?\]", response)) >= num_placeholders


@register("detectable_content:postscript", ifeval=True)
def postscript(response, *, postscript_marker: Text) -> bool:
    """The lowercased response contains the marker: 'P.S.' matches p.s. / p. s.; 'P.P.S' matches p.p.s / p. p. s;
    any other marker is matched, lowercased, as a regular expression. It need not start a line, as in IFEval."""
    marker = postscript_marker.strip()
    # IFEval's patterns are r"\s*<marker>.*$" under MULTILINE; the \s* and .*$ always match, so a search for the
    # marker alone gives the same verdicts.
    regex = {"P.P.S": r"p\.\s?p\.\s?s", "P.S.": r"p\.\s?s\."}.get(marker, marker.lower())
    return _pattern(regex, re.MULTILINE).search(response.lower()) is not None


# --- detectable format ------------------------------------------------------------------------------------------

_STAR_BULLET = re.compile(r"^\s*\*[^\*].*$", re.MULTILINE)
_DASH_BULLET = re.compile(r"^\s*-.*$", re.MULTILINE)


def count_bullets(response: str) -> int:
    """Lines starting (after whitespace) with '*' not followed by '*', plus lines starting with '-'."""
    return len(_STAR_BULLET.findall(response)) + len(_DASH_BULLET.findall(response))


@register("detectable_format:number_bullet_lists", ifeval=True)
def number_bullet_lists(response, *, num_bullets: int) -> bool:
    """Exactly `num_bullets` bullet lines: lines starting (after whitespace) with '*' not followed by '*' or with
    '-' (so '---' and '-5' lines count, '**bold**' lines do not)."""
    return count_bullets(response) == num_bullets


_CONSTRAINED_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


@register("detectable_format:constrained_response", ifeval=True)
def constrained_response(response) -> bool:
    """The response contains one of 'My answer is yes.', 'My answer is no.', 'My answer is maybe.' (case matters)."""
    return any(option in response.strip() for option in _CONSTRAINED_OPTIONS)


@register("detectable_format:number_highlighted_sections", ifeval=True)
def number_highlighted_sections(response, *, num_highlights: int) -> bool:
    """At least `num_highlights` highlights: *text* spans and **text** spans within one line with non-blank text.
    A **bold** span counts once, as a double highlight."""
    n = sum(bool(h.strip("*").strip()) for h in re.findall(r"\*[^\n\*]*\*", response))
    n += sum(bool(h[2:-2].strip()) for h in re.findall(r"\*\*[^\n\*]*\*\*", response))
    return n >= num_highlights


@register("detectable_format:multiple_sections", ifeval=True)
def multiple_sections(response, *, section_spliter: Text, num_sections: int) -> bool:
    """At least `num_sections` section headers '<section_spliter> <number>' (e.g. 'SECTION 2'; the splitter is
    case-sensitive, stripped, and a regular expression as in IFEval; the space before the number is optional)."""
    splitter = _pattern(section_spliter.strip(), 0, r"\s?{}\s?\d+\s?")
    return len(splitter.split(response)) - 1 >= num_sections


@register("detectable_format:json_format", ifeval=True)
def json_format(response) -> bool:
    """The response, stripped and with one leading ```json / ```Json / ```JSON / ``` fence and one trailing ```
    fence removed, parses with json.loads (which also takes a bare number or string)."""
    value = response.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        value = value.removeprefix(fence)
    value = value.removesuffix("```").strip()
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


@register("detectable_format:title", ifeval=True)
def title(response) -> bool:
    """A title in double angular brackets on one line, <<like this>>, with non-blank text inside."""
    return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", response))


# --- combination ------------------------------------------------------------------------------------------------

@register("combination:two_responses", ifeval=True)
def two_responses(response) -> bool:
    """Exactly two non-blank responses separated by '******' that differ once stripped; blank parts are allowed
    only before the first or after the last separator."""
    parts = response.split("******")
    valid = []
    for i, part in enumerate(parts):
        if part.strip():
            valid.append(part.strip())
        elif 0 < i < len(parts) - 1:
            return False
    return len(valid) == 2 and valid[0] != valid[1]


@register("combination:repeat_prompt", ifeval=True, prompt_kwarg="prompt_to_repeat")
def repeat_prompt(response, *, prompt_to_repeat: Text) -> bool:
    """The response, stripped, starts with `prompt_to_repeat` (stripped), ignoring case.

    IFEval rows carry `prompt_to_repeat` (the request without the repeat instruction); where the kwargs leave it
    out, `check(..., prompt=...)` and the IFEval scorer use the whole prompt.
    """
    return response.strip().lower().startswith(prompt_to_repeat.strip().lower())


# --- start / end and punctuation --------------------------------------------------------------------------------

@register("startend:end_checker", ifeval=True)
def end_checker(response, *, end_phrase: Text) -> bool:
    """The response, stripped of surrounding whitespace and then of double quotes, ends with `end_phrase`
    (stripped), ignoring case. Nothing may follow the phrase."""
    return response.strip().strip('"').lower().endswith(end_phrase.strip().lower())


@register("startend:quotation", ifeval=True)
def quotation(response) -> bool:
    """The stripped response is at least two characters long and starts and ends with an ASCII double quote."""
    value = response.strip()
    return len(value) > 1 and value[0] == '"' and value[-1] == '"'


@register("punctuation:no_comma", ifeval=True)
def no_comma(response) -> bool:
    """No ASCII comma ',' anywhere (other commas, such as '，' or '، ', are allowed)."""
    return "," not in response
