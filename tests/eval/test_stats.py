"""eval.stats' paired item x seed bootstrap and sign-flip permutation test (methods.md 4.7) against closed forms:
the exact permutation distribution by enumeration, degenerate designs whose interval is known, and the normal
approximation; the seed standard deviation of a macro aggregate."""

import itertools

import numpy as np
import pytest

from harnessrl_jax.eval.stats import macro_mean, paired_bootstrap_grid, paired_permutation, seed_sd


def test_permutation_p_matches_the_exact_sign_flip_distribution():
    d = np.array([0.9, 1.4, -0.3, 2.1, 0.2, 1.1, -0.8, 0.6, 1.7, 0.4])
    a = np.random.default_rng(0).normal(50, 10, d.size)
    b = a + d
    flips = np.array(list(itertools.product((-1, 1), repeat=d.size)))
    exact = np.mean(np.abs(flips @ d / d.size) >= abs(d.mean()) - 1e-12)
    obs, p = paired_permutation(a, b, 20_000, seed=1)
    assert obs == pytest.approx(d.mean())
    assert p == pytest.approx(exact, abs=0.01) and 0.01 < exact < 0.2
    # a large consistent margin: no permutation reaches it, so p is the floor 1 / (1 + n)
    obs, p = paired_permutation(np.zeros(40), np.full(40, 3.0) + np.linspace(0, 0.1, 40), 10_000)
    assert p == pytest.approx(1 / 10_001)
    # NaN pairs are left out
    assert paired_permutation([1.0, np.nan, 2.0], [2.0, 5.0, 3.0], 100)[0] == pytest.approx(1.0)


def test_grid_bootstrap_keeps_strata_weights_fixed():
    """Differences constant within each domain: every resample gives the macro mean of the domain differences
    (not the item-weighted mean), so the interval collapses onto it."""
    strata = np.array(["med"] * 30 + ["sci"] * 5)
    a = np.random.default_rng(0).normal(40, 15, (35, 3))
    b = a + np.where(strata == "med", 1.0, 5.0)[:, None]
    diff, lo, hi = paired_bootstrap_grid(a, b, strata, 2000)
    assert diff == pytest.approx(3.0) and lo == pytest.approx(3.0) and hi == pytest.approx(3.0)
    assert np.mean(b - a) == pytest.approx((30 * 1 + 5 * 5) / 35)  # the item-weighted mean would differ
    assert macro_mean(b, strata) - macro_mean(a, strata) == pytest.approx(3.0)


def test_grid_bootstrap_resamples_seeds_crossed_with_items():
    """Differences that vary only by seed, e = (0, 1, 5): a resample's margin is the mean of 3 seeds drawn with
    replacement, so all-0 and all-5 draws (probability 1/27 > 2.5% each) put the interval at exactly [0, 5]; an
    item-only bootstrap would give the point 2."""
    a = np.zeros((20, 3))
    b = a + np.array([0.0, 1.0, 5.0])
    diff, lo, hi = paired_bootstrap_grid(a, b, None, 4000, seed=2)
    assert (diff, lo, hi) == (pytest.approx(2.0), pytest.approx(0.0), pytest.approx(5.0))


def test_grid_bootstrap_with_one_seed_agrees_with_the_normal_approximation():
    rng = np.random.default_rng(3)
    a = rng.normal(50, 20, (400, 1))
    d = rng.normal(2.0, 6.0, (400, 1))
    diff, lo, hi = paired_bootstrap_grid(a, a + d, None, 4000)
    half = 1.96 * d.std(ddof=1) / np.sqrt(d.size)
    assert diff == pytest.approx(d.mean())
    assert lo == pytest.approx(diff - half, abs=0.15 * half) and hi == pytest.approx(diff + half, abs=0.15 * half)
    with pytest.raises(ValueError, match="not aligned"):
        paired_bootstrap_grid(a, a[:10], None, 10)


def test_seed_sd_is_the_ddof1_deviation_of_the_per_seed_macro_aggregates():
    rng = np.random.default_rng(2)
    x = rng.normal(60, 5, (9, 3))
    x[4, 1] = np.nan
    strata = np.array(list("aaabbcccc"))
    per_seed = [np.mean([np.nanmean(x[strata == d, s]) for d in "abc"]) for s in range(3)]
    assert seed_sd(x, strata) == pytest.approx(np.std(per_seed, ddof=1))
    assert seed_sd(x) == pytest.approx(np.std(np.nanmean(x, axis=0), ddof=1))
    assert np.isnan(seed_sd(x[:, :1]))  # one seed: no deviation
