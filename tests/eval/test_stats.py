"""eval.stats against closed forms: the run-level test against scipy's one-sample t test on hand-computed per-seed
macro margins, its degenerate designs, and a simulation of many experiments with run-to-run variance (its false
positive rate is nominal, the paper's cell-level test's is not, its power matches the noncentral t); the paper's
item x seed bootstrap and sign-flip permutation test against the exact permutation distribution,
designs whose interval is known and the normal approximation; the seed standard deviation of a macro aggregate."""

import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from harnessrl_jax.eval.stats import macro_mean, paired_bootstrap_grid, paired_permutation, run_level_test, seed_sd


def _hand_macro(x, strata):
    return np.mean([np.nanmean(x[strata == k]) for k in np.unique(strata) if np.isfinite(x[strata == k]).any()])


def test_run_level_test_is_the_paired_t_test_over_per_seed_macro_margins():
    rng = np.random.default_rng(4)
    strata = np.array(["med"] * 30 + ["sci"] * 6 + ["law"] * 14)
    a = rng.normal(50, 15, (50, 4))
    b = a + rng.normal(1.0, 8, (50, 4)) + rng.normal(0, 1.5, 4)  # the last term: each run's own shift
    per_seed = np.array([_hand_macro(b[:, s], strata) - _hand_macro(a[:, s], strata) for s in range(4)])
    ref = scipy_stats.ttest_1samp(per_seed, 0.0)
    ci = ref.confidence_interval(0.95)
    diff, lo, hi, p = run_level_test(a, b, strata)
    assert diff == pytest.approx(_hand_macro(b, strata) - _hand_macro(a, strata)) == pytest.approx(per_seed.mean())
    assert (lo, hi, p) == (pytest.approx(ci.low), pytest.approx(ci.high), pytest.approx(ref.pvalue))
    _, lo90, hi90, p90 = run_level_test(a, b, strata, level=0.9)
    ci90 = ref.confidence_interval(0.9)
    assert (lo90, hi90, p90) == (pytest.approx(ci90.low), pytest.approx(ci90.high), pytest.approx(p))
    assert run_level_test(a, b, strata, 10, seed=7) == (diff, lo, hi, p)  # nothing is drawn
    # the macro margin, not the item-weighted one
    assert abs(np.nanmean(b - a) - diff) > 1e-3

    # A missing cell is left out of its stratum's mean; a seed with no finite cell in one arm drops that pair
    # (S - 1 = 2 degrees of freedom left).
    a[3, 0], b[40, 2], b[:, 1] = np.nan, np.nan, np.nan
    kept = [0, 2, 3]
    per_seed = np.array([_hand_macro(b[:, s], strata) - _hand_macro(a[:, s], strata) for s in kept])
    diff, lo, hi, p = run_level_test(a, b, strata)
    assert diff == pytest.approx(_hand_macro(b, strata) - _hand_macro(a, strata))
    se = per_seed.std(ddof=1) / np.sqrt(3)
    assert p == pytest.approx(2 * scipy_stats.t.sf(abs(diff) / se, 2))
    assert hi - lo == pytest.approx(2 * scipy_stats.t.ppf(0.975, 2) * se)
    with pytest.raises(ValueError, match="run_level_test.*not aligned"):
        run_level_test(a, b[:, :3])
    with pytest.raises(ValueError, match="strata has shape"):
        run_level_test(a, b, strata[:10])


def test_run_level_test_degenerate_designs_give_nan_or_the_documented_values():
    rng = np.random.default_rng(5)
    a = rng.normal(50, 10, (20, 3))
    nan_tail = [np.isnan(v) for v in run_level_test(a[:, :1], a[:, :1] + 2)[1:]]
    assert run_level_test(a[:, :1], a[:, :1] + 2)[0] == pytest.approx(2.0) and all(nan_tail)  # one run
    assert all(np.isnan(run_level_test(np.full((5, 3), np.nan), a[:5])))  # nothing finite in one arm
    assert run_level_test(a, a.copy()) == (0.0, 0.0, 0.0, 1.0)  # identical arms
    same_margin = run_level_test(a, a + 3.0)  # the same margin in every run: no run variance to count
    assert same_margin[0] == pytest.approx(3.0) and all(np.isnan(same_margin[1:]))
    assert run_level_test(a[:, 0], a[:, 0] + 1)[0] == pytest.approx(1.0)  # [items] is one seed


# A simulated comparison at the paper's scale: four domains of unequal size; every item has its own difficulty
# (shared by both arms); every run (arm, seed) shifts all its items by a run effect of SD RUN_SD; every cell has
# its own noise of SD CELL_SD. The macro aggregate's seed SD is then ~0.39 points, as the paper reports (0.3-0.4).
SIZES = (1600, 1200, 800, 400)
RUN_SD, CELL_SD = 0.35, 10.0


def _experiments(rng, count, seeds, margin, chunk=100):
    """Yields (a, b) [items, seeds] of `count` independent experiments; arm b's true macro score is a's + margin."""
    items = sum(SIZES)
    for start in range(0, count, chunk):
        e = min(chunk, count - start)
        item = rng.normal(55, 18, (e, items, 1)).astype(np.float32)
        a, b = (item + shift + RUN_SD * rng.standard_normal((e, 1, seeds), np.float32)
                + CELL_SD * rng.standard_normal((e, items, seeds), np.float32) for shift in (0.0, margin))
        yield from zip(a, b)


def test_run_level_test_keeps_its_false_positive_rate_where_the_cell_level_test_does_not():
    """Two identical arms differing only by run noise: over 1000 experiments of 3 seeds the run-level test rejects
    at p < 0.05 within the central 99.9% of Binomial(1000, 0.05); the paper's sign-flip over (item, seed) cells
    rejects, over 100 of them, at a rate whose 99.9% lower bound is three times the nominal one (the cell count
    hides that every item of a run moves with the run). With a margin of 1.5 points and 3 seeds the run-level
    test's power is the noncentral t's, within the binomial bound."""
    rng = np.random.default_rng(0)
    strata = np.repeat(np.arange(len(SIZES)), SIZES)
    experiments = 1000
    p_runs, sds, p_cells = [], [], []
    for n, (a, b) in enumerate(_experiments(rng, experiments, 3, 0.0)):
        p_runs.append(run_level_test(a, b, strata)[3])
        if n < 100:
            sds.append(seed_sd(a, strata))
            p_cells.append(paired_permutation(a, b, 100, seed=n)[1])
    assert 0.3 < np.sqrt(np.mean(np.square(sds))) < 0.45  # the paper's seed SD of the macro aggregate
    lo, hi = scipy_stats.binom.interval(0.999, experiments, 0.05)
    rejected = int(np.sum(np.asarray(p_runs) < 0.05))
    assert lo <= rejected <= hi, f"run-level test rejected {rejected} of {experiments} true nulls"
    cells_rejected = int(np.sum(np.asarray(p_cells) < 0.05))
    cells_low = scipy_stats.binomtest(cells_rejected, len(p_cells)).proportion_ci(0.999).low
    assert cells_low > 3 * 0.05, f"cell-level test rejected {cells_rejected} of {len(p_cells)} true nulls"

    # power at a 1.5-point margin with 3 seeds; the per-seed margin's SD follows from the design
    margin, seeds, count = 1.5, 3, 300
    cell_var = CELL_SD ** 2 / len(SIZES) ** 2 * np.sum(1 / np.asarray(SIZES))
    sd_margin = np.sqrt(2 * RUN_SD ** 2 + 2 * cell_var)
    crit = scipy_stats.t.ppf(0.975, seeds - 1)
    nc = margin / (sd_margin / np.sqrt(seeds))
    power = scipy_stats.nct.sf(crit, seeds - 1, nc) + scipy_stats.nct.cdf(-crit, seeds - 1, nc)
    hits = sum(run_level_test(a, b, strata)[3] < 0.05 for a, b in _experiments(rng, count, seeds, margin))
    lo, hi = scipy_stats.binom.interval(0.999, count, power)
    assert 0.6 < power < 0.75 and lo <= hits <= hi, (hits, count, power)


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
