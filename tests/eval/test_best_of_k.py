"""Best-of-K's exact expectation against brute force over every K-subset, and on a tiny policy's samples."""

import itertools

import numpy as np
import pytest

from harnessrl_jax.eval.best_of_k import best_of_k_curve, expected_best_of_k, sample_scores


@pytest.mark.parametrize("k", [1, 2, 3, 5, 6])
def test_expected_best_of_k_equals_the_mean_over_every_subset(k):
    s = np.random.default_rng(k).choice([0.0, 25.0, 50.0, 100.0], 6)
    brute = np.mean([max(c) for c in itertools.combinations(s, k)])
    assert expected_best_of_k(s, k) == pytest.approx(brute)


def test_nan_and_short_rows():
    assert expected_best_of_k([1.0, np.nan, 3.0], 2) == pytest.approx(3.0)
    assert np.isnan(expected_best_of_k([1.0, np.nan], 2))
    curve = best_of_k_curve(np.array([[0, 0, 100, 0], [50, 50, 50, 50]]), ks=(1, 2, 4))
    assert curve == pytest.approx({1: (25 + 50) / 2, 2: (50 + 50) / 2, 4: (100 + 50) / 2})


def test_on_the_tiny_policy(tiny_setup):
    scores = sample_scores(tiny_setup, tiny_setup.tasks, n=8, seed=3)
    assert scores.shape == (len(tiny_setup.tasks), 8)
    curve = best_of_k_curve(scores, ks=(1, 2, 4, 8))
    assert curve[1] == pytest.approx(np.nanmean(scores))  # K = 1 is the mean
    assert curve[8] == pytest.approx(np.nanmean(scores.max(axis=1)))  # K = n is the max
    assert curve[1] <= curve[2] <= curve[4] <= curve[8]
