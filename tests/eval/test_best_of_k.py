"""Best-of-K's exact expectation against brute force over every K-subset, on a tiny policy's samples, and the arms'
margins against a paired t over the seeds computed by hand."""

import itertools

import numpy as np
import pytest
from scipy import stats

from harnessrl_jax.eval.best_of_k import best_of_k_curve, best_of_k_stats, expected_best_of_k, sample_scores


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


def test_arm_margins_count_runs_and_pair_the_seeds():
    """Two arms x 3 seeds, items in two domains of unequal size, 5 samples each: per seed the macro (mean of domain
    means) of every item's mean best over all K-subsets, the margin a paired t over seeds. Catches a wrong subset
    expectation, seeds paired by position instead of by seed (the reference's are given in another order), a
    micro mean, and an interval from the (item, seed) cells."""
    rng = np.random.default_rng(0)
    domains = ["a"] * 4 + ["b"] * 2
    base = {s: rng.choice([0.0, 20.0, 60.0, 100.0], (6, 5)) for s in (2, 0, 1)}
    arm = {s: np.clip(base[s] + rng.normal(8 + 4 * s, 5, (6, 5)), 0, 100) for s in (0, 1, 2)}
    got = best_of_k_stats({"base": base, "arm": arm}, domains, ks=(1, 2, 4), reference="base")

    def macro(scores, k):
        per_item = [np.mean([max(c) for c in itertools.combinations(row, k)]) for row in scores]
        return np.mean([np.mean(per_item[:4]), np.mean(per_item[4:])])

    for row in got["arm"]:
        k = row["k"]
        d = np.array([macro(arm[s], k) - macro(base[s], k) for s in (0, 1, 2)])
        half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
        assert row["diff"] == pytest.approx(d.mean())
        assert row["ci95_runs"] == pytest.approx([d.mean() - half, d.mean() + half])
        assert row["p_runs"] == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
        assert row["macro"] == pytest.approx(np.mean([macro(arm[s], k) for s in (0, 1, 2)]))
        assert row["seed_sd"] == pytest.approx(np.std([macro(arm[s], k) for s in (0, 1, 2)], ddof=1))
        assert row["seeds"] == 3 and row["paired_seeds"] == [0, 1, 2]
    assert all("diff" not in r for r in got["base"])
    one = best_of_k_stats({"base": {0: base[0]}, "arm": {0: arm[0]}}, domains, ks=(2,), reference="base")
    assert one["arm"][0]["seed_sd"] is None and one["arm"][0]["ci95_runs"] == [None, None]  # one run: no interval
