"""Text measures the attributor and the proposers share: words, degenerate responses, shared sentences, the
keywords a rule checks, whether a text quotes a record. Pure functions of strings."""

from __future__ import annotations

import functools
import math
import operator
import re
from typing import Sequence

import numpy as np

_WORD = re.compile(r"\w+")
STOPWORDS = frozenset("""a an the and or but if then else of to in on at by for with without from into onto over
under about above below as is are was were be been being it its this that these those there their they them he she
his her we our you your i me my not no nor so than too very can could should would will shall may might must do
does did done have has had having which who whom whose what when where why how all any both each few more most
other some such only own same just also any one two three""".split())


# ASCII characters that are not word characters, to spaces: on an ASCII text, str.split then finds the runs _WORD
# finds, ~4x faster (launch/bench_scale.py).
_ASCII_NOT_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not _WORD.match(c)})


def words(text: str) -> list[str]:
    """Lowercased runs of word characters (the counting `length_constraints:number_words` uses)."""
    low = text.lower()
    return low.translate(_ASCII_NOT_WORD).split() if low.isascii() else _WORD.findall(low)


# The per-response measures are cached: the attributor asks them of each response once per criterion it tests,
# and at paper length (~1,500 words) every scan costs milliseconds (launch/bench_scale.py).
_CACHED = 1 << 13


# The measures below are asked of one group's responses in turn: a few dozen word lists serve them all.
@functools.lru_cache(maxsize=64)
def _words(text: str) -> tuple[str, ...]:
    return tuple(words(text))


@functools.lru_cache(maxsize=_CACHED)
def word_count(text: str) -> int:
    return len(_words(text))


@functools.lru_cache(maxsize=_CACHED)
def word_set(text: str) -> frozenset[str]:
    """The distinct words of `text`: what a set of content words meets in it (their intersection is the one with
    its content words), without filtering each of its words."""
    return frozenset(_words(text))


@functools.lru_cache(maxsize=_CACHED)
def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in word_set(text) - STOPWORDS if len(w) > 2 and not w.isdigit())


@functools.lru_cache(maxsize=_CACHED)
def degenerate(text: str, min_words: int = 8, repeat_run: int = 3, distinct_ratio: float = 0.5) -> str | None:
    """Why a response is degenerate ('very short', 'repeated tokens', 'repetitive'), or None."""
    w = _words(text)
    if len(w) < min_words:
        return "very short"
    # a run of `repeat_run` identical tokens: repeat_run - 1 consecutive tokens equal to the next one
    if b"\1" * (repeat_run - 1) in bytes(map(operator.eq, w, w[1:])):
        return "repeated tokens"
    if len(w) >= 10 and len(set(w)) / len(w) < distinct_ratio:
        return "repetitive"
    return None


def length_auc(a: Sequence[float], b: Sequence[float]) -> float:
    """P(a random element of a > one of b) + half the ties (the Mann-Whitney AUC)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not a.size or not b.size:
        return math.nan
    return float((a[:, None] > b[None, :]).mean() + 0.5 * (a[:, None] == b[None, :]).mean())


# Sentence ends: whitespace after . ! or ?, and line breaks. The punctuation is split off with the whitespace
# rather than looked behind for (the split ~1.8x faster on paper-length responses): it is not a word character, so the
# sentences' words are the same.
_SENTENCE_END = re.compile(r"[.!?]\s+|\n+")


@functools.lru_cache(maxsize=64)  # asked for one group's responses once per saturated criterion
def _sentences(text: str) -> frozenset[str]:
    """The distinct normalised sentences of `text` (lowercase words, >= 3 of them)."""
    joined = (" ".join(words(p)) for p in _SENTENCE_END.split(text))
    return frozenset(s for s in joined if s.count(" ") >= 2)


def shared_sentences(responses: Sequence[str], share: float) -> list[str]:
    """Normalised sentences (lowercase words, >= 3 of them) found in at least `share` of the responses."""
    if not responses:
        return []
    counts: dict[str, int] = {}
    for r in responses:
        for s in _sentences(r):
            counts[s] = counts.get(s, 0) + 1
    need = share * len(responses)
    return sorted(s for s, n in counts.items() if n >= need)


def schema_of(criterion):
    """The schema.Criterion of a harness RubricCriterion (or the criterion itself)."""
    return criterion.to_criterion() if hasattr(criterion, "to_criterion") else criterion


def readable_pattern(pattern: str) -> str:
    """A rule keyword regex as a word a reader (and a guidance field) can use: '\\b(fluid|water)' -> 'fluid'."""
    p = re.sub(r"\(\?[a-zA-Z]+\)", "", pattern)
    p = re.sub(r"\\[bBsSwWdD]", " ", p)
    while True:  # each innermost group by its first alternative
        m = re.search(r"\(([^()]*)\)", p)
        if not m:
            break
        p = p[:m.start()] + re.sub(r"^\?[:=!<]*", "", m.group(1)).split("|")[0] + p[m.end():]
    p = p.split("|")[0]
    p = re.sub(r"\\(.)", r"\1", p)
    p = re.sub(r"[()\[\]^$*+?{}|.]", "", p)
    return " ".join(p.split())


def rule_keywords(criterion) -> list[str]:
    """The keyword patterns a keyword rule checks (keywords:existence, frequency, word_frequency)."""
    c = schema_of(criterion)
    rid, kw = c.rule_id, c.rule_kwargs
    if rid == "keywords:existence":
        return list(kw.get("keywords", []))
    if rid in ("keywords:frequency", "keywords:word_frequency") and kw.get("keyword"):
        return [kw["keyword"]]
    if rid == "keywords:regex_match" and kw.get("pattern"):
        return [kw["pattern"]]
    return []


def search(pattern: str, text: str):
    """re.search, case-insensitive; a pattern that is not a valid regex is searched for literally."""
    try:
        return re.search(pattern, text, re.I)
    except re.error:
        return re.search(re.escape(pattern), text, re.I)


def cut(text: str, n: int) -> str:
    """`text` stripped, and cut to n characters with ' ...' when longer."""
    text = text.strip()
    return text if len(text) <= n else text[:n].rstrip() + " ..."


def valid_regex(p: str) -> bool:
    """Whether `p` compiles as a regex."""
    try:
        re.compile(p)
        return True
    except re.error:
        return False


def jaccard(a: str, b: str) -> float:
    """Overlap of the content words of two texts (intersection over union)."""
    x, y = content_words(a), content_words(b)
    return len(x & y) / len(x | y) if x | y else 0.0



def quotes(text: str, record: str, n: int = 8) -> bool:
    """Does `text` quote `record`: a run of `n` consecutive words of it (lowercased word characters, so case,
    punctuation and spacing do not matter), or all of it when it has fewer words?"""
    src, out = words(record), words(text)
    k = min(n, len(src))
    if k == 0 or len(out) < k:
        return False
    grams = {tuple(src[i:i + k]) for i in range(len(src) - k + 1)}
    return any(tuple(out[i:i + k]) in grams for i in range(len(out) - k + 1))
