"""Text measures of the attributor, against plain re-derivations."""

import itertools

import numpy as np

from harnessrl_jax.evolver.text import degenerate


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
