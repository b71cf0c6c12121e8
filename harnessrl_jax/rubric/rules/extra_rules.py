"""Checkers beyond IFEval: ranges, at-most bounds, character limits, numbered lists, headings, regexes, starts.

Counting is shared with the IFEval checkers where the notion is the same (words, sentences, bullets), so a
threshold means the same thing under either id. Relations are `Comparison`: 'less than', 'at most', 'exactly',
'at least', 'more than'.
"""

from __future__ import annotations

import re
from typing import Annotated

from harnessrl_jax.rubric.rules import text
from harnessrl_jax.rubric.rules.ifeval_rules import count_bullets
from harnessrl_jax.rubric.rules.registry import Comparison, KwargError, Regex, Text, compare, register


def _range_kwargs(low: str, high: str):
    """Validator for an inclusive [low, high] range where either end may be left out, but not both."""

    def validate(kw: dict) -> None:
        if low not in kw and high not in kw:
            raise KwargError(low, f"or {high!r} must be given")
        if low in kw and high in kw and kw[low] > kw[high]:
            raise KwargError(low, f"({kw[low]}) must be <= {high} ({kw[high]})")

    return validate


def _in_range(n: int, low: int | None, high: int | None) -> bool:
    return (low is None or n >= low) and (high is None or n <= high)


# --- length -----------------------------------------------------------------------------------------------------

@register("length_constraints:number_characters")
def number_characters(response, *, num_chars: int, relation: Comparison) -> bool:
    """The number of characters (Unicode code points, spaces and newlines included) of the response with leading
    and trailing whitespace removed is `relation` `num_chars`."""
    return compare(len(response.strip()), relation, num_chars)


@register("length_constraints:word_range", validate=_range_kwargs("min_words", "max_words"))
def word_range(response, *, min_words: int | None = None, max_words: int | None = None) -> bool:
    """min_words <= words <= max_words (either bound may be left out), words counted as in
    length_constraints:number_words (runs of \\w characters)."""
    return _in_range(text.count_words(response), min_words, max_words)


@register("length_constraints:sentence_range", validate=_range_kwargs("min_sentences", "max_sentences"))
def sentence_range(response, *, min_sentences: int | None = None, max_sentences: int | None = None) -> bool:
    """min_sentences <= sentences <= max_sentences (either bound may be left out), sentences counted as in
    length_constraints:number_sentences (NLTK's English Punkt)."""
    return _in_range(text.count_sentences(response), min_sentences, max_sentences)


def count_blank_line_paragraphs(response: str) -> int:
    """Non-blank blocks separated by one or more blank (or whitespace-only) lines."""
    return sum(1 for block in re.split(r"\n[^\S\n]*\n", response) if block.strip())


@register("length_constraints:paragraph_range", validate=_range_kwargs("min_paragraphs", "max_paragraphs"))
def paragraph_range(response, *, min_paragraphs: int | None = None, max_paragraphs: int | None = None) -> bool:
    """min_paragraphs <= paragraphs <= max_paragraphs (either bound may be left out), where paragraphs are the
    non-blank blocks separated by one or more blank lines (unlike IFEval's '***' and '\\n\\n' splits)."""
    return _in_range(count_blank_line_paragraphs(response), min_paragraphs, max_paragraphs)


# --- format -----------------------------------------------------------------------------------------------------

_NUMBERED_ITEM = re.compile(r"^[^\S\n]*\d+[.)][^\S\n]+\S", re.MULTILINE)


@register("detectable_format:numbered_list")
def numbered_list(response, *, num_items: int, relation: Comparison = "exactly") -> bool:
    """The number of numbered-list lines, i.e. lines starting (after spaces) with digits, '.' or ')', a space and
    text ('1. Eggs', '2) Milk'; not '1.5 kg' or '3.'), is `relation` `num_items` (default: exactly)."""
    return compare(len(_NUMBERED_ITEM.findall(response)), relation, num_items)


@register("detectable_format:bullet_count")
def bullet_count(response, *, num_bullets: int, relation: Comparison = "at least") -> bool:
    """The number of bullet lines, counted as in detectable_format:number_bullet_lists ('*' or '-' starting a
    line), is `relation` `num_bullets` (default: at least)."""
    return compare(count_bullets(response), relation, num_bullets)


_HEADING = re.compile(r"^ {0,3}#{1,6}[^\S\n]+\S", re.MULTILINE)


@register("detectable_format:number_headings")
def number_headings(response, *, num_headings: int, relation: Comparison = "at least") -> bool:
    """The number of markdown ATX headings, i.e. lines of up to 3 spaces, 1-6 '#', a space and text ('## Plan'; not
    '#hashtag'), is `relation` `num_headings` (default: at least)."""
    return compare(len(_HEADING.findall(response)), relation, num_headings)


# --- keywords ---------------------------------------------------------------------------------------------------

@register("keywords:regex_match")
def regex_match(response, *, pattern: Regex, full_match: bool = False) -> bool:
    """Python regular expression `pattern` matches somewhere in the response (re.search), or, with
    `full_match`, matches the whole response stripped of surrounding whitespace (re.fullmatch). Flags go inline,
    e.g. '(?i)' to ignore case."""
    if full_match:
        return re.fullmatch(pattern, response.strip()) is not None
    return re.search(pattern, response) is not None


@register("keywords:word_frequency")
def word_frequency(response, *, keyword: Text, frequency: int, relation: Comparison) -> bool:
    """The number of whole-word, case-insensitive occurrences of the literal `keyword` (stripped; not preceded or
    followed by a \\w character, so 'war' is not counted in 'software' or 'wars') is `relation` `frequency`."""
    n = len(re.findall(r"(?<!\w)" + re.escape(keyword.strip()) + r"(?!\w)", response, re.IGNORECASE))
    return compare(n, relation, frequency)


# --- start, case, punctuation ------------------------------------------------------------------------------------

@register("startend:start_checker")
def start_checker(response, *, start_phrase: Text) -> bool:
    """The response, stripped of surrounding whitespace and then of double quotes, starts with `start_phrase`
    (stripped), ignoring case; the mirror of startend:end_checker."""
    return response.strip().strip('"').lower().startswith(start_phrase.strip().lower())


@register("change_case:all_capital")
def all_capital(response) -> bool:
    """The response has cased letters and none is lowercase (str.isupper), in any language and script."""
    return response.isupper()


@register("change_case:all_lowercase")
def all_lowercase(response) -> bool:
    """The response has cased letters and none is uppercase (str.islower), in any language and script."""
    return response.islower()


def _nonempty(value: str) -> None:
    if not value:
        raise ValueError("must not be empty")


@register("punctuation:forbidden_characters")
def forbidden_characters(response, *, characters: Annotated[str, _nonempty]) -> bool:
    """None of the characters in the string `characters` occurs in the response (e.g. '!;' bans '!' and ';')."""
    return not any(c in response for c in set(characters))
