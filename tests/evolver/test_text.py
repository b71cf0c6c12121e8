"""Text measures of the attributor, against plain re-derivations."""

import itertools
import re

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings

from harnessrl_jax.evolver.text import _sentences, degenerate, words


def test_repeated_tokens_is_a_run_of_repeat_run_identical_words():
    """Against itertools.groupby's longest run; catches an off-by-one in the run search (a run one short taken,
    or runs split by one other word joined)."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        w = [f"w{i}" for i in rng.integers(0, 3, rng.integers(8, 30))]
        for run in (1, 2, 3, 4):
            longest = max(len(list(g)) for _, g in itertools.groupby(w))
            want = "repeated tokens" if longest >= run else None
            got = degenerate(" ".join(w), 8, run, 0.0)
            assert got == want, (w, run)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from([*map(chr, range(128)), "\u00e9", "\u00b2", "\u0301", "\u212a", "\u00a0",
                                         "\u2014", "\u0130"]), max_size=40))
def test_words_are_the_runs_of_word_characters_of_the_lowercased_text(text):
    """Against re.findall(r'\\w+') on the lowercased text; catches an ASCII character the fast split takes for a
    separator or a word character wrongly ('_', '\\x1c'), and the fast split used where the text is not ASCII."""
    assert words(text) == re.findall(r"\w+", text.lower())


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(["a", "b", "c", "d", "1", "_", " ", " ", "\n", "\r", "\t", "\x1c", "\x85",
                                         "\u00a0", "\u2028", ".", "!", "?", ",", "'", "\u2014", "\u00e9"]),
               max_size=60))
def test_sentences_are_those_split_after_end_punctuation_and_at_line_breaks(text):
    """Against the definition (split at whitespace that follows . ! or ? and at runs of line breaks, the end
    punctuation kept): catches a split that loses a sentence end (punctuation runs, whitespace other than a space)
    or makes one where there is none ('a.b', '.,' before a space)."""
    pieces = re.split(r"(?<=[.!?])\s+|\n+", text)
    want = {" ".join(re.findall(r"\w+", p.lower())) for p in pieces}
    assert _sentences(text) == frozenset(s for s in want if s.count(" ") >= 2)
