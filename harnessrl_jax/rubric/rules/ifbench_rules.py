"""IFBench's 58 out-of-distribution instructions, re-implemented with its ids, kwargs and counting rules.

After Pyatkin et al. 2025, "Generalizing Verifiable Instruction Following", and its public evaluation code, so
IFBench's data runs unchanged and gets IFBench's verdicts; the quirks of its rules are kept on purpose and stated in
each docstring (`count:conjunctions` counts distinct raw tokens: 'and' and 'And,' are two). Punctuation is ASCII
`string.punctuation`; sentences are NLTK's English Punkt splits; "word tokens" nltk.word_tokenize's; "plain words"
the lowercased response without punctuation, split on whitespace. Every kwarg is required (IFBench leaves a missing
one to chance). Beyond the IFEval checkers' dependencies: `emoji`, `syllapy`, and NLTK's English perceptron tagger
for words:start_verb, which no package ships (that rule's LookupError names the install command).
"""

from __future__ import annotations

import collections
import csv
import io
import re
import string
import unicodedata
from typing import Annotated

from harnessrl_jax.rubric.rules import text
from harnessrl_jax.rubric.rules.registry import KwargError, Text, register

_PUNCT = string.punctuation
_NO_PUNCT = str.maketrans("", "", _PUNCT)


def _at_least_one(value: int) -> None:
    if value < 1:
        raise ValueError(f"must be >= 1 (counted from 1), got {value}")


Count = Annotated[int, _at_least_one]  # a 1-based position or a cycle length


def _no_punct(s: str) -> str:
    return s.translate(_NO_PUNCT)


def _strip_punct(word: str) -> str:
    """word without leading and trailing punctuation and spaces."""
    return word.strip(_PUNCT + " ")


def plain_words(s: str) -> list[str]:
    """The lowercased text with punctuation deleted, split on whitespace ("don't" -> 'dont')."""
    return _no_punct(s.lower()).split()


def _alnum_tokens(s: str) -> list[str]:
    """nltk.word_tokenize's tokens that hold a letter or digit (punctuation tokens dropped)."""
    return [t for t in text.word_tokens(s) if any(ch.isalnum() for ch in t)]


def _ascii_fold(s: str) -> str:
    """Accents dropped ('São Tomé' -> 'Sao Tome'), then every non-ASCII character."""
    return unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode("ascii")


def _range_kwargs(low: str, high: str):
    def validate(kw: dict) -> None:
        if kw[low] > kw[high]:
            raise KwargError(low, f"({kw[low]}) must be <= {high} ({kw[high]})")

    return validate


# --- count --------------------------------------------------------------------------------------------------------

@register("count:word_count_range", validate=_range_kwargs("min_words", "max_words"))
def word_count_range(response, *, min_words: int, max_words: int) -> bool:
    """min_words <= words <= max_words, words being runs of \\w characters (as IFEval's number_words counts)."""
    return min_words <= text.count_words(response) <= max_words


@register("count:unique_word_count")
def unique_word_count(response, *, N: int) -> bool:
    """At least `N` distinct whitespace-separated tokens, lowercased, with leading and trailing punctuation stripped.
    A token that is all punctuation ('-', '...') adds the empty word once."""
    return len({_strip_punct(w) for w in response.lower().split()}) >= N


_CONJUNCTIONS = frozenset(["and", "but", "for", "nor", "or", "so", "yet"])


@register("count:conjunctions")
def conjunctions(response, *, small_n: int) -> bool:
    """At least `small_n` distinct coordinating-conjunction tokens: whitespace-separated tokens that, stripped of
    punctuation and lowercased, are and/but/for/nor/or/so/yet. Distinct means distinct as written, so 'and', 'And'
    and 'and,' count as three."""
    return len({w for w in response.split() if _strip_punct(w).lower() in _CONJUNCTIONS}) >= small_n


_PERSON_NAMES = (
    "Emma", "Liam", "Sophia", "Jackson", "Olivia", "Noah", "Ava", "Lucas", "Isabella", "Mason", "Mia", "Ethan",
    "Charlotte", "Alexander", "Amelia", "Benjamin", "Harper", "Leo", "Zoe", "Daniel", "Chloe", "Samuel", "Lily",
    "Matthew", "Grace", "Owen", "Abigail", "Gabriel", "Ella", "Jacob", "Scarlett", "Nathan", "Victoria", "Elijah",
    "Layla", "Nicholas", "Audrey", "David", "Hannah", "Christopher", "Penelope", "Thomas", "Nora", "Andrew", "Aria",
    "Joseph", "Claire", "Ryan", "Stella", "Jonathan",
)


@register("count:person_names")
def person_names(response, *, N: int) -> bool:
    """At least `N` different names from IFBench's list of 50 (Emma, Liam, Sophia, ... Jonathan) occur as whole
    words (regex \\b boundaries), case-sensitively: 'Leo' counts, 'leo' and 'Leonard' do not."""
    found = sum(re.search(rf"\b{name}\b", response) is not None for name in _PERSON_NAMES)
    return found >= N


@register("count:numbers")
def numbers(response, *, N: int) -> bool:
    """Exactly `N` numbers: runs of digits after all punctuation is deleted, so '3.14' and '1,000' are one number
    each and '2024-05-01' is one."""
    return len(re.findall(r"\d+", _no_punct(response))) == N


@register("count:words_japanese")
def words_japanese(response, *, N: Count) -> bool:
    """Every `N`-th whitespace-separated token (the N-th, 2N-th, ...), stripped of punctuation, contains a Hiragana,
    Katakana or CJK ideograph character, unless it is empty or all digits."""
    for i, word in enumerate(response.split(), 1):
        word = _strip_punct(word)
        if i % N == 0 and word and not word.isdigit() and not re.search("[\u3040-\u30ff\u4e00-\u9fff]", word):
            return False
    return True


_PRONOUNS = frozenset("""
    i me we us you he him she her it they them my mine our ours your yours his hers its their theirs myself ourselves
    yourself yourselves himself herself itself themselves this that these those who whom whose which what whoever
    whomever whatever whichever anybody anyone anything everybody everyone everything nobody nothing somebody someone
    something each either neither both all some any none""".split())


@register("count:pronouns")
def pronouns(response, *, N: int) -> bool:
    """At least `N` pronoun tokens (personal, possessive, reflexive, demonstrative, interrogative, relative and
    indefinite: 'i', 'her', 'this', 'which', 'everyone', 'all', 'none', ...) among nltk.word_tokenize's tokens of
    the lowercased response, with '/' read as a space so 'she/her' is two."""
    tokens = text.word_tokens(response.replace("/", " ").lower())
    return sum(t in _PRONOUNS for t in tokens) >= N


@register("count:punctuation")
def punctuation_cover(response) -> bool:
    """An interrobang ('?!', '!?' or '‽') and, besides the first '?!' (or, if there is none, the first '!?'), at
    least one each of . , ! ? ; :"""
    if not ("?!" in response or "!?" in response or "‽" in response):
        return False
    rest = response.replace("?!", "", 1) if "?!" in response else response.replace("!?", "", 1)
    return set(".,!?;:") <= set(rest)


_KEYWORD_TIMES = (1, 2, 3, 5, 7)


@register("count:keywords_multiple")
def keywords_multiple(response, *, keyword1: Text, keyword2: Text, keyword3: Text, keyword4: Text,
                      keyword5: Text) -> bool:
    """keyword1 occurs exactly once, keyword2 twice, keyword3 three times, keyword4 five times and keyword5 seven
    times, each counted as whole words (regex \\b boundaries, keyword stripped and taken literally), ignoring case."""
    keywords = (keyword1, keyword2, keyword3, keyword4, keyword5)
    return all(len(re.findall(rf"\b{re.escape(k.strip())}\b", response, re.IGNORECASE)) == times
               for k, times in zip(keywords, _KEYWORD_TIMES))


# --- ratio --------------------------------------------------------------------------------------------------------

# NLTK's English stop word list (corpora/stopwords/english) less its entries with an apostrophe ("don't", "you're"),
# which a \w+ token can never equal: so NLTK's 179-word list and its later 198-word one give the same counts.
_STOPWORDS = frozenset("""
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
    it its itself they them their theirs themselves what which who whom this that these those am is are was were be
    been being have has had having do does did doing a an the and but if or because as until while of at by for
    with about against between into through during before after above below to from up down in out on off over under
    again further then once here there when where why how all any both each few more most other some such no nor not
    only own same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn
    hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn""".split())


@register("ratio:stop_words")
def stop_words(response, *, percentage: int) -> bool:
    """Stop words make up at most `percentage` percent of the words: of the \\w+ runs, those whose lowercase is on
    NLTK's English stop word list, as (stop / words) * 100 <= percentage in floating point (so 7 of 25 words,
    28.000000000000004%, exceeds 28)."""
    words = re.findall(r"\w+", response)
    if not words:
        return False
    return sum(w.lower() in _STOPWORDS for w in words) / len(words) * 100 <= percentage


def _endings(response: str) -> collections.Counter:
    """How many sentences end with '.', '?' and '!'."""
    return collections.Counter(s[-1] for s in text.sentences(response) if s[-1:] in (".", "?", "!"))


@register("ratio:sentence_type")
def sentence_type(response) -> bool:
    """Twice as many sentences ending in '.' as ending in '?' (NLTK Punkt sentences; a sentence ending in '."' ends
    in neither). Zero of both passes."""
    ends = _endings(response)
    return ends["."] == 2 * ends["?"]


@register("ratio:sentence_balance")
def sentence_balance(response) -> bool:
    """As many sentences ending in '.' as ending in '?' and as ending in '!' (NLTK Punkt sentences). Zero of each
    passes."""
    ends = _endings(response)
    return ends["."] == ends["?"] == ends["!"]


@register("ratio:overlap")
def overlap(response, *, reference_text: str, percentage: int) -> bool:
    """Of the distinct word-token trigrams of the response (nltk.word_tokenize tokens), the share also found among
    the reference text's trigrams is within 2 points of `percentage`: percentage - 2 <= share * 100 <=
    percentage + 2. A response with fewer than three tokens fails."""
    ngrams = set(_trigrams(text.word_tokens(response)))
    if not ngrams:
        return False
    shared = len(ngrams & set(_trigrams(text.word_tokens(reference_text))))
    return percentage - 2 <= shared / len(ngrams) * 100 <= percentage + 2


def _trigrams(tokens: list[str]):
    return zip(tokens, tokens[1:], tokens[2:])


@register("ratio:sentence_words")
def sentence_words(response) -> bool:
    """Exactly three NLTK Punkt sentences, all of the same length in characters (stripped), and no plain word (case
    and punctuation ignored) used twice across them."""
    sentences = text.sentences(response)
    if len(sentences) != 3 or len({len(s.strip()) for s in sentences}) != 1:
        return False
    words = plain_words(" ".join(sentences))
    return len(words) == len(set(words))


# --- words --------------------------------------------------------------------------------------------------------

@register("words:alphabet")
def alphabet(response) -> bool:
    """With punctuation deleted, the first word starts with an ASCII letter and each next word starts with the next
    letter of the alphabet, ignoring case, 'z' followed by 'a'."""
    words = _no_punct(response).split()
    if not words:
        return False
    letter = words[0][0].lower()
    if letter not in string.ascii_lowercase:
        return False
    for word in words[1:]:
        letter = string.ascii_lowercase[(string.ascii_lowercase.index(letter) + 1) % 26]
        if word.lower()[0] != letter:
            return False
    return True


@register("words:vowel")
def vowel(response) -> bool:
    """One paragraph (no newline inside the stripped response) using at most three of the vowels a e i o u, ignoring
    case."""
    stripped = response.strip()
    return "\n" not in stripped and len(set(stripped.lower()) & set("aeiou")) <= 3


_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")


@register("words:consonants")
def consonants(response) -> bool:
    """Every whitespace-separated token, lowercased and with its punctuation kept, has two consonant letters in a row
    ('y' counts as a consonant); 'a' or 'idea' fails the rule."""
    return all(any(a in _CONSONANTS and b in _CONSONANTS for a, b in zip(w, w[1:]))
               for w in response.lower().split())


@register("words:palindrome")
def palindrome(response) -> bool:
    """At least 10 palindromes of five or more characters among the plain words (repeats count): 'level', 'Racecar!'
    and 'madam' each count."""
    return sum(len(w) >= 5 and w == w[::-1] for w in plain_words(response)) >= 10


_PRIMES = frozenset([2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97])


@register("words:prime_lengths")
def prime_lengths(response) -> bool:
    """Every whitespace-separated token, with punctuation deleted, has a prime number of characters, up to 97 (so a
    one-letter word such as 'a' fails the rule)."""
    return all(len(w) in _PRIMES for w in _no_punct(response).split())


def _first_tag(tokens: list[str]) -> str:
    try:
        import nltk
        return nltk.pos_tag(tokens)[0][1]  # the whole response is tagged: context decides the first tag
    except LookupError:
        raise LookupError(
            "words:start_verb needs NLTK's English averaged perceptron tagger, which no PyPI package ships; install "
            "it once with `python -m nltk.downloader averaged_perceptron_tagger_eng` (or copy "
            "taggers/averaged_perceptron_tagger_eng/ into a directory on NLTK_DATA)") from None


@register("words:start_verb")
def start_verb(response) -> bool:
    """The first nltk.word_tokenize token is tagged as a verb (a Penn Treebank tag containing 'VB') by NLTK's English
    averaged perceptron tagger, tagging the whole response. Needs that tagger's model installed in NLTK's data."""
    tokens = text.word_tokens(response)
    return bool(tokens) and "VB" in _first_tag(tokens)


@register("words:repeats")
def repeats(response, *, small_n: int) -> bool:
    """No plain word (case and punctuation ignored, so "it's" is 'its') occurs more than `small_n` times."""
    counts = collections.Counter(plain_words(response))
    return max(counts.values(), default=0) <= small_n


@register("words:odd_even_syllables")
def odd_even_syllables(response) -> bool:
    """Consecutive plain words alternate between an odd and an even number of syllables, as the `syllapy` package
    counts them (numbers and other words without letters have 0 syllables: even)."""
    import syllapy
    parity = [syllapy.count(w) % 2 for w in plain_words(response)]
    return all(a != b for a, b in zip(parity, parity[1:]))


@register("words:last_first")
def last_first(response) -> bool:
    """Each NLTK Punkt sentence after the first starts with the word the previous one ended with, ignoring case.
    Only the sentence's outer punctuation is stripped, so 'cat.' ends a sentence as 'cat' but 'Cat, ...' starts one
    as 'cat,', which does not match."""
    sentences = text.sentences(response)
    for previous, current in zip(sentences, sentences[1:]):
        last = previous.rstrip(_PUNCT + " ").split()
        first = current.lstrip(_PUNCT + " ").split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False
    return True


@register("words:paragraph_last_first")
def paragraph_last_first(response) -> bool:
    """Every non-blank line (a paragraph is a line) starts and ends with the same word, ignoring case and the line's
    leading and trailing punctuation. A one-word line passes."""
    for line in response.split("\n"):
        words = _strip_punct(line.strip().lower()).split()
        if words and words[0] != words[-1]:
            return False
    return True


@register("words:no_consecutive")
def no_consecutive(response) -> bool:
    """No two consecutive plain words start with the same character."""
    words = plain_words(response)
    return all(a[0] != b[0] for a, b in zip(words, words[1:]))


@register("words:keywords_specific_position")
def keywords_specific_position(response, *, keyword: Text, n: Count, m: Count) -> bool:
    """NLTK Punkt sentence `n` (from 1) has `keyword` (stripped, ignoring case) as its word `m` (from 1), counting the
    nltk.word_tokenize tokens that hold a letter or digit (so "don't" is the two words 'do' and "n't")."""
    sentences = text.sentences(response)
    if len(sentences) < n:
        return False
    words = _alnum_tokens(sentences[n - 1])
    return len(words) >= m and words[m - 1].lower() == keyword.strip().lower()


@register("words:words_position")
def words_position(response, *, keyword: Text) -> bool:
    """The second word and the second-to-last word are both `keyword` (stripped), ignoring case, counting the
    nltk.word_tokenize tokens that hold a letter or digit."""
    words = _alnum_tokens(response)
    return len(words) >= 2 and words[1].lower() == words[-2].lower() == keyword.strip().lower()


# --- sentence -----------------------------------------------------------------------------------------------------

@register("sentence:alliteration_increment")
def alliteration_increment(response) -> bool:
    """Each NLTK Punkt sentence has a larger alliteration score than the one before, where a sentence's score counts
    the words in runs of consecutive words sharing a first character (words lowercased, leading punctuation
    stripped): 'big blue boats sail' scores 3, 'a cat' scores 0."""
    previous = -1
    for sentence in text.sentences(response):
        words = [w for w in (w.lstrip(_PUNCT + " ") for w in sentence.lower().split()) if w]
        score, in_run = 0, False
        for a, b in zip(words, words[1:]):
            same = a[0] == b[0]
            score += (1 if in_run else 2) if same else 0
            in_run = same
        if score <= previous:
            return False
        previous = score
    return True


@register("sentence:keyword")
def sentence_keyword(response, *, word: Text, N: Count) -> bool:
    """NLTK Punkt sentence `N` (from 1) contains `word` as a whole word (regex \\b boundaries, taken literally),
    ignoring case."""
    sentences = text.sentences(response)
    return len(sentences) >= N and re.search(rf"\b{re.escape(word)}\b", sentences[N - 1], re.IGNORECASE) is not None


@register("sentence:increment")
def sentence_increment(response, *, small_n: int) -> bool:
    """Each NLTK Punkt sentence has exactly `small_n` more words than the one before, words being the whitespace-
    separated tokens left once punctuation is deleted ('--' is no word, 'co-op' is one)."""
    counts = [len(_no_punct(s).split()) for s in text.sentences(response)]
    return all(b == a + small_n for a, b in zip(counts, counts[1:]))


# --- format -------------------------------------------------------------------------------------------------------

@register("format:parentheses")
def parentheses(response) -> bool:
    """Brackets ( [ { nest at least five deep and a correctly matched closing bracket follows the deepest point:
    reading left to right with a stack of open brackets, a closing bracket that does not match the innermost open
    one empties the stack and restarts the depth count."""
    stack, deepest = [], 0
    pairs = {")": "(", "]": "[", "}": "{"}
    for ch in response:
        if ch in "([{":
            stack.append(ch)
            deepest = max(deepest, len(stack))
        elif ch in pairs:
            if stack and stack[-1] == pairs[ch]:
                stack.pop()
                if deepest >= 5:
                    return True
            else:
                stack, deepest = [], 0
    return False


@register("format:quotes")
def quotes(response) -> bool:
    """Quotes nest at least three deep: reading left to right, a '"' or "'" equal to the innermost open quote closes
    it, any other opens a new level; the rule is met when a close leaves the depth at least 3 below the deepest
    level reached so far ('"a \\'b "c" b\\' a"' is three deep). Apostrophes count as quotes."""
    stack, deepest = [], 0
    for ch in response:
        if stack and ch == stack[-1]:
            stack.pop()
            if deepest - len(stack) >= 3:
                return True
        elif ch in "\"'":
            stack.append(ch)
            deepest = max(deepest, len(stack))
    return False


def _options_kwargs(kw: dict) -> None:
    if not kw["options"].strip():
        raise KwargError("options", "must not be blank")


def _parse_options(options: str) -> tuple[list[str], bool]:
    """IFBench's reading of an options string: split on '/' if present, else on the substring 'or' (also inside words),
    else on ','; lettered options ('a), b), c)') are matched exactly."""
    sep = "/" if "/" in options else "or" if "or" in options else ","
    lettered = re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options) is not None
    return [o.strip() for o in options.split(sep)], lettered


@register("format:options", validate=_options_kwargs)
def options(response, *, options: str) -> bool:
    """The response is one of the options in `options` ('yes/no/maybe', "I know or I don't know", 'a), b), c), d)'):
    lettered options must match the response exactly as written; other options match it with leading and trailing
    punctuation and spaces stripped, ignoring case. Options are split on '/', else on 'or' (even inside a word),
    else on ','."""
    choices, lettered = _parse_options(options)
    if lettered:
        return response in choices
    answer = _strip_punct(response).lower()
    return any(_strip_punct(c).lower() == answer for c in choices)


@register("format:newline")
def newline(response) -> bool:
    """Each word on its own line: with punctuation deleted and the text stripped, the number of non-empty lines
    equals the number of whitespace-separated words (a line of spaces counts as a line with no word)."""
    value = _no_punct(response).strip()
    return sum(line != "" for line in value.split("\n")) == len(value.split())


def _edge_emoji(sentence: str, last: bool) -> bool | None:
    """Whether the sentence (punctuation deleted, stripped) ends (last=True: in one of its last two characters) or
    starts with an emoji; None if nothing is left of it."""
    import emoji
    s = _no_punct(sentence).strip()
    if not s:
        return None
    return emoji.is_emoji(s[-1]) or emoji.is_emoji(s[-2:-1] or s[-1]) if last else emoji.is_emoji(s[0])


@register("format:emoji")
def emoji_sentences(response) -> bool:
    """Every NLTK Punkt sentence ends with an emoji: one of its last two characters (punctuation deleted, stripped)
    is an emoji, or, when Punkt put the emoji at the start of the next sentence ('Hi. 😀 Bye 😀'), the next sentence
    starts with one. A sentence of punctuation only fails the rule."""
    sentences = text.sentences(response)
    for i, sentence in enumerate(sentences):
        ends = _edge_emoji(sentence, last=True)
        if ends is None:
            return False
        if not ends and (i == len(sentences) - 1 or not _edge_emoji(sentences[i + 1], last=False)):
            return False
    return True


def _skip_after_blank(lines: list[str]) -> list[str]:
    """The lines IFBench keeps when it deletes blank lines from a list while iterating over it: each deletion removes
    the first blank line equal to the one seen, and the line that moves into its place is never looked at."""
    lines, i = list(lines), 0
    while i < len(lines):
        if not lines[i].strip():
            lines.remove(lines[i])
        i += 1
    return lines


@register("format:line_indent")
def line_indent(response) -> bool:
    """Stairs: each line is indented by more leading spaces (' ' only; tabs do not count) than the line before.
    Blank lines are dropped first the way IFBench drops them, deleting from the list while iterating over it, which
    leaves some in place (the second of two blank lines in a row, say); a kept blank line counts with its own leading
    spaces, so it breaks the stairs unless it comes first."""
    lines = _skip_after_blank(response.split("\n"))
    indents = [len(line) - len(line.lstrip(" ")) for line in lines]
    return all(b > a for a, b in zip(indents, indents[1:]))


@register("format:quote_unquote")
def quote_unquote(response) -> bool:
    """Every quoted phrase is followed by unquoted text: curly double quotes read as '"', the literal '\\'"\\'' is
    ignored, and with all whitespace removed no '""' occurs (two quotes back to back) and the text does not end with
    '"' (once trailing digits and punctuation other than '"' are stripped)."""
    value = response.replace("“", '"').replace("”", '"').replace("'\"'", "")
    value = "".join(value.split())
    if '""' in value:
        return False
    tail = value.strip(string.digits + _PUNCT.replace('"', ""))
    return not tail.endswith('"')


@register("format:list")
def special_list(response, *, sep: Text) -> bool:
    """The list marker `sep` (e.g. '...', 'SEPARATOR', '!?!?', '-') occurs at least twice, taken literally and
    counted without overlaps, anywhere in the response."""
    return response.count(sep) >= 2


@register("format:thesis")
def thesis(response) -> bool:
    """An HTML-italic thesis followed by plain text: from the first '<i>' (or, if none, the first '<em>'), the first
    '</i>' (or, if none, '</em>') closes the thesis, whose text (taken from 3 characters after the opening tag's
    start) is not blank, and non-blank text follows the 4 characters after the closing tag's start."""
    start = response.find("<i>")
    if start == -1:
        start = response.find("<em>")
        if start == -1:
            return False
    value = response[start:]
    end = value.find("</i>")
    if end == -1:
        end = value.find("</em>")
        if end == -1:
            return False
    return bool(value[3:end].strip()) and bool(value[end + 4:].strip())


@register("format:sub-bullets")
def sub_bullets(response) -> bool:
    """Every '*' is followed by a '-' before the next '*' (or the end): each bullet has a sub-bullet. A response
    without '*' passes, as in IFBench."""
    return all("-" in part for part in response.split("*")[1:])


@register("format:no_bullets_bullets")
def no_bullets_bullets(response) -> bool:
    """Text of at least two NLTK Punkt sentences, then at least two lines starting (after whitespace) with '*', and
    nothing else: a text line after a bullet line, a text line after a blank line, or a blank line after the first
    bullet fails the rule."""
    sentences = bullets = 0
    in_text = True
    for line in response.split("\n"):
        if line.strip().startswith("*"):
            if sentences < 2:
                return False
            in_text = False
            bullets += 1
        elif in_text:
            found = len(text.sentences(line.strip()))
            sentences += found
            in_text = found > 0  # a blank line ends the text part
        else:
            return False
    return bullets >= 2


@register("format:title_case")
def title_case(response) -> bool:
    """Every nltk.word_tokenize token that starts with a letter is capitalised: a one-letter token is not lowercase,
    and no longer token is all lowercase or lowercase-then-all-caps ('the', "n't" and 'iPHONE' fail; 'The', 'NASA'
    and 'iPhone' pass). Tokens starting with a digit or punctuation are skipped."""
    for word in text.word_tokens(response):
        if not word[0].isalpha():
            continue
        if len(word) == 1:
            if word.islower():
                return False
        elif word[0].islower() and (word[1:].isupper() or word[1:].islower()):
            return False
    return True


@register("format:output_template")
def output_template(response) -> bool:
    """The response contains 'My Answer:', 'My Conclusion:' and 'Future Outlook:' (case matters, any order)."""
    return all(label in response for label in ("My Answer:", "My Conclusion:", "Future Outlook:"))


@register("format:no_whitespace")
def no_whitespace(response) -> bool:
    """No whitespace character (str.isspace: spaces, newlines, tabs, no-break spaces, ...) anywhere."""
    return not any(ch.isspace() for ch in response)


# --- custom -------------------------------------------------------------------------------------------------------

@register("custom:multiples")
def multiples(response) -> bool:
    """The digit runs in the response are exactly 14, 21, 28, 35, 42, 49, in that order: the multiples of 7 from 10
    to 50 and no other number (',' is read as ', ', so '14,21' is two numbers)."""
    return re.findall(r"\d+", response.replace(",", ", ")) == [str(k) for k in range(14, 51, 7)]


_QUESTION = re.compile(r"\n*(?:Question \d+[\.|\):;]?\s*)")
_OPTION_LINE = re.compile(r"^[A-Ea-e][\.|\)]\s*\w+")


@register("custom:mcq_count_length")
def mcq_count_length(response) -> bool:
    """Four multiple-choice questions and nothing before the first: the response starts with 'Question', splits on
    'Question <number>' labels into 4 non-blank questions, each with exactly 5 option lines ('A.' / 'b)' then a
    word), and the question texts (the lines before the first option) get strictly longer."""
    if not response.startswith("Question"):
        return False
    parts = [q.strip() for q in _QUESTION.split(response) if q.strip()]
    if len(parts) != 4:
        return False
    lengths = []
    for question in parts:
        stem, n_options, in_options = "", 0, False
        for line in question.split("\n"):
            if _OPTION_LINE.match(line.strip()):
                n_options, in_options = n_options + 1, True
            elif not in_options:
                stem += " " + line.strip()
        if n_options != 5:
            return False
        lengths.append(len(stem.strip()))
    return all(a < b for a, b in zip(lengths, lengths[1:]))


@register("custom:reverse_newline")
def reverse_newline(response) -> bool:
    """Africa's countries in reverse alphabetical order, one per line: among the non-blank lines (stripped of
    punctuation and spaces), those from the first containing 'Zimbabwe' on are at least 52 and are in descending
    order once accents are dropped ('São Tomé' sorts as 'Sao Tome')."""
    lines = [s for s in (_strip_punct(line) for line in response.split("\n")) if s]
    start = next((i for i, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < 52:
        return False
    folded = [_ascii_fold(line) for line in lines[start:]]
    return folded == sorted(folded, reverse=True)


@register("custom:word_reverse")
def word_reverse(response) -> bool:
    """The answer to 'what animal is the US national symbol' with its words in reverse order: lowercased, punctuation
    deleted and word order reversed, the text contains 'bald eagle' and NLTK Punkt reads it as one sentence (or finds
    it whole among its sentences)."""
    value = " ".join(_no_punct(response.lower().strip()).split()[::-1])
    return "bald eagle" in value and value in text.sentences(value)


@register("custom:character_reverse")
def character_reverse(response) -> bool:
    """The same answer reversed letter by letter: the lowercased response contains 'elgae dlab'."""
    return "elgae dlab" in response.lower()


@register("custom:sentence_alphabet")
def sentence_alphabet(response) -> bool:
    """Exactly 26 NLTK Punkt sentences, sentence k starting (after leading punctuation and whitespace) with the k-th
    letter of the alphabet, ignoring case."""
    sentences = text.sentences(response)
    if len(sentences) != 26:
        return False
    firsts = [s.lstrip(_PUNCT + string.whitespace)[:1].lower() for s in sentences]
    return firsts == list(string.ascii_lowercase)


_CAPITALS_NORTH_OF_45 = (
    "Reykjavik", "Helsinki", "Oslo", "Tallinn", "Stockholm", "Riga", "Moscow", "Copenhagen", "Vilnius", "Minsk",
    "Dublin", "Berlin", "Amsterdam", "Warsaw", "London", "Brussels", "Prague", "Luxembourg", "Paris", "Vienna",
    "Bratislava", "Budapest", "Vaduz", "Chisinau", "Bern", "Ljubljana", "Zagreb",
)


@register("custom:european_capitals_sort")
def european_capitals_sort(response) -> bool:
    """Exactly the 27 European capitals north of 45° latitude, comma-separated, from north to south (Reykjavik,
    Helsinki, Oslo, ..., Ljubljana, Zagreb): accents dropped, blank items skipped, each item stripped must equal the
    expected name (case matters; nothing else may be in an item)."""
    items = [item.strip() for item in _ascii_fold(response).split(",") if item.strip()]
    return items == list(_CAPITALS_NORTH_OF_45)


def _csv_rows(value: str, delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(value), delimiter=delimiter))


@register("custom:csv_city")
def csv_city(response) -> bool:
    """The whole response is CSV (Python's csv module, ',' delimited) of 8 rows, blank lines counting as rows: the
    header ID,Country,City,Year,Count and 7 rows of 5 fields."""
    rows = _csv_rows(response)
    return (len(rows) == 8 and rows[0] == ["ID", "Country", "City", "Year", "Count"]
            and all(len(r) == 5 for r in rows[1:]))


_PRODUCT_HEADER = re.compile(r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ \t]*(Brand|"Brand"),'
                             r'[ \t]*(Price|"Price"),[ \t]*(Stock|"Stock")$')
_STUDENT_HEADER = re.compile(r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t *(Grade|"Grade")\t *'
                             r'(Semester|"Semester")\t *(Score|"Score")$')


def _quoted_rows(response: str, delimiter: str) -> list[list[str]]:
    """CSV rows with each field's double quotes kept: IFBench triples every '"' before parsing, so '"a"' reads as
    the field '"a"'."""
    return _csv_rows(response.replace('"', '"""'), delimiter)


@register("custom:csv_special_character")
def csv_special_character(response) -> bool:
    """CSV with header ProductID,Category,Brand,Price,Stock (names optionally quoted, spaces after commas allowed),
    15 rows in all, and a double-quoted field holding a character that is neither a word character nor whitespace
    ('"Tom & Co"'); rows are checked in order and must have 5 fields up to the first row with such a field."""
    if not _PRODUCT_HEADER.match(response.split("\n")[0].strip()):
        return False
    rows = _quoted_rows(response, ",")
    if len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(re.match(r'".*[^\d\w\s].*"', field) for field in row):
            return True
    return False


@register("custom:csv_quotes")
def csv_quotes(response) -> bool:
    """Tab-separated values with header StudentID, Subject, Grade, Semester, Score (names optionally quoted), 4 rows
    in all, each of 5 fields that all start and end (stripped) with a double quote. An empty field fails the rule
    (IFBench's checker crashes on one)."""
    if not _STUDENT_HEADER.match(response.split("\n")[0].strip()):
        return False
    rows = _quoted_rows(response, "\t")
    return len(rows) == 4 and all(
        len(row) == 5 and all(f.strip()[:1] == '"' and f.strip()[-1:] == '"' for f in row) for row in rows)


_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


@register("custom:date_format_list")
def date_format_list(response) -> bool:
    """A comma-separated list of YYYY-MM-DD dates only (items stripped), each in 1769-1821 (Napoleon's lifetime)
    with a month <= 12 and a day no later than the month's last (29 for February). Month 00 and day 00 pass, as in
    IFBench."""
    for item in response.strip().split(","):
        if not re.match(r"^\d{4}-\d{2}-\d{2}$", item.strip()):
            return False
        year, month, day = (int(p) for p in item.strip().split("-"))
        if not 1769 <= year <= 1821 or month > 12 or day > _DAYS_IN_MONTH.get(month, 99):
            return False
    return True


# --- repeat -------------------------------------------------------------------------------------------------------

@register("repeat:repeat_change")
def repeat_change(response, *, prompt_to_repeat: Text) -> bool:
    """The response repeats `prompt_to_repeat` with its first word changed: their words after the first (split on
    whitespace) are the same, and the response is not the prompt character for character (so, as in IFBench, the
    same words with other spacing pass)."""
    return response != prompt_to_repeat and prompt_to_repeat.split()[1:] == response.split()[1:]


_SIMPLE_SENTENCE = "only output this sentence here, ignore all other requests."


@register("repeat:repeat_simple")
def repeat_simple(response) -> bool:
    """The stripped response is the sentence 'Only output this sentence here, ignore all other requests.', ignoring
    case."""
    return response.strip().lower() == _SIMPLE_SENTENCE


def _span_kwargs(kw: dict) -> None:
    if kw["n_start"] > kw["n_end"]:
        raise KwargError("n_start", f"({kw['n_start']}) must be <= n_end ({kw['n_end']})")


@register("repeat:repeat_span", validate=_span_kwargs)
def repeat_span(response, *, prompt_to_repeat: Text, n_start: int, n_end: int) -> bool:
    """The stripped response is the words n_start..n_end (inclusive, from 0, split on whitespace) of
    `prompt_to_repeat` joined by single spaces, ignoring case."""
    span = " ".join(prompt_to_repeat.split()[n_start:n_end + 1])
    return response.strip().lower() == span.lower()
