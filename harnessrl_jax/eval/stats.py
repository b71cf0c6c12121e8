"""Interval estimates and tests for evaluation tables. `run_level_test` compares two arms' macro aggregates with
the training run as the unit (the default of every table); `paired_bootstrap_grid` and `paired_permutation`
reproduce the paper's cell-level procedures, which treat every (item, seed) cell as independent and so understate
the variance between runs; `seed_sd` is the macro aggregate's standard deviation over seeds; `bootstrap_mean` and
`paired_bootstrap` resample the tasks of one evaluation (one run), where the task is the independent draw.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats


def bootstrap_mean(x, n: int = 2000, *, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean of the finite entries of `x` and its percentile bootstrap interval; NaNs when
    nothing is finite."""
    x = np.asarray(x, np.float64).ravel()
    x = x[np.isfinite(x)]
    if not x.size:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, (n, x.size))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    return float(x.mean()), float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))


def paired_bootstrap(a, b, n: int = 2000, *, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of b - a over the pairs where both are finite; a and b are aligned (same task, seed)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired_bootstrap: {a.shape} and {b.shape} are not aligned")
    return bootstrap_mean(b - a, n, seed=seed, level=level)


def _strata_index(strata, n_items: int) -> list[np.ndarray]:
    strata = np.asarray(strata if strata is not None else np.zeros(n_items, int))
    if strata.shape != (n_items,):
        raise ValueError(f"strata has shape {strata.shape}, expected ({n_items},): one label per item")
    return [np.flatnonzero(strata == s) for s in dict.fromkeys(strata.tolist())]


def _stratum_totals(x: np.ndarray, groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """[K, S] sums and counts of the finite cells of each stratum in each seed."""
    finite = np.isfinite(x)
    clean = np.where(finite, x, 0.0)
    return (np.stack([clean[idx].sum(axis=0) for idx in groups]),
            np.stack([finite[idx].sum(axis=0) for idx in groups]))


def _macro_of(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The macro aggregate along the leading (strata) axis; strata with no finite cell are left out, NaN if none."""
    present = counts > 0
    means = np.where(present, sums / np.maximum(counts, 1), 0.0)
    k = present.sum(axis=0)
    return np.where(k > 0, means.sum(axis=0) / np.maximum(k, 1), np.nan)


def _per_seed_macro(x: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """[S]: each seed's macro aggregate over its finite cells (NaN for a seed with none)."""
    return _macro_of(*_stratum_totals(x, groups))


def macro_mean(x, strata=None) -> float:
    """The mean over strata of each stratum's mean over its finite (item, seed) cells: the paper's macro aggregate
    (every domain or benchmark weighs the same, whatever its number of items). x: [I, S] or [I]."""
    x = np.asarray(x, np.float64)
    x = x[:, None] if x.ndim == 1 else x
    means = [np.nanmean(x[idx]) for idx in _strata_index(strata, x.shape[0]) if np.isfinite(x[idx]).any()]
    return float(np.mean(means)) if means else float("nan")


def _grid_pair(a, b, name: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    a = a[:, None] if a.ndim == 1 else a
    b = b[:, None] if b.ndim == 1 else b
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"{name}: {a.shape} and {b.shape} are not aligned [items, seeds] arrays")
    return a, b


def run_level_test(a, b, strata=None, n: int = 10_000, *, seed: int = 0, level: float = 0.95
                   ) -> tuple[float, float, float, float]:
    """(diff, low, high, p) with the training run as the unit: diff = macro(b) - macro(a); the `level` interval and
    the two-sided p are Student's paired t over the per-seed margins macro(b[:, s]) - macro(a[:, s]), S - 1 degrees
    of freedom, so a margin made of run noise alone is rejected at the nominal rate whatever the number of items.

    a, b: [I, S] per-(item, seed) scores of two arms on the same items, column s of both from seed s (NaN: missing);
    strata: [I] labels, None for one stratum. `n` and `seed` are accepted so that a caller swaps this for the
    cell-level procedures without changing its arguments; the t procedure is closed-form and draws nothing.
    Degenerate designs: fewer than two seeds with a finite margin, or no finite cell, give NaN interval and p; a
    margin identical in every run gives (0, 0, 0, 1) when it is 0 and a NaN interval and p otherwise (no run
    variance to count)."""
    del n, seed
    a, b = _grid_pair(a, b, "run_level_test")
    groups = _strata_index(strata, a.shape[0])
    nan = float("nan")
    (sum_a, count_a), (sum_b, count_b) = _stratum_totals(a, groups), _stratum_totals(b, groups)
    diff = float(_macro_of(sum_b.sum(1), count_b.sum(1)) - _macro_of(sum_a.sum(1), count_a.sum(1)))
    d = _macro_of(sum_b, count_b) - _macro_of(sum_a, count_a)
    d = d[np.isfinite(d)]
    if not np.isfinite(diff) or d.size < 2:
        return diff, nan, nan, nan
    sd = float(d.std(ddof=1))
    if sd <= 1e-12 * max(1.0, float(np.abs(d).max())):
        return (0.0, 0.0, 0.0, 1.0) if abs(diff) <= 1e-12 else (diff, nan, nan, nan)
    se = sd / np.sqrt(d.size)
    df = d.size - 1
    half = float(scipy_stats.t.ppf(0.5 + level / 2, df)) * se
    p = 2 * float(scipy_stats.t.sf(abs(diff) / se, df))
    return diff, diff - half, diff + half, p


def sign_flip_seeds(p: float) -> int:
    """The fewest runs per arm with which an exact paired sign-flip over runs can give a two-sided p below `p`: its
    smallest p is 2 / 2**S, whatever the margins."""
    if not 0 < p <= 1:
        raise ValueError(f"sign_flip_seeds: p = {p} is not in (0, 1]")
    return math.floor(1 + math.log2(1 / p)) + 1


def paired_bootstrap_grid(a, b, strata=None, n: int = 10_000, *, seed: int = 0, level: float = 0.95
                          ) -> tuple[float, float, float]:
    """The paper's interval (a reproduction; it counts (item, seed) cells, not runs, so it is too narrow when runs
    differ): (diff, low, high), the macro aggregate of b minus that of a, with a percentile interval
    from `n` resamples that draw items with replacement within each stratum (so the strata keep their weights) and,
    crossed with them, seeds with replacement; both arms are aggregated on the same draws.

    a, b: [I, S] per-(item, seed) scores of two arms on the same items and seeds (NaN: missing, left out of means);
    strata: [I] labels (a domain or benchmark per item), None for one stratum."""
    a, b = _grid_pair(a, b, "paired_bootstrap_grid")
    groups = _strata_index(strata, a.shape[0])
    num_seeds = a.shape[1]
    rng = np.random.default_rng(seed)
    diffs = np.empty(n)
    for r in range(n):
        seeds = rng.integers(0, num_seeds, num_seeds)
        per_a, per_b = [], []
        for idx in groups:
            items = idx[rng.integers(0, idx.size, idx.size)]
            per_a.append(np.nanmean(a[np.ix_(items, seeds)]))
            per_b.append(np.nanmean(b[np.ix_(items, seeds)]))
        diffs[r] = np.nanmean(per_b) - np.nanmean(per_a)
    tail = 100 * (1 - level) / 2
    return (macro_mean(b, strata) - macro_mean(a, strata), float(np.nanpercentile(diffs, tail)),
            float(np.nanpercentile(diffs, 100 - tail)))


def paired_permutation(a, b, n: int = 10_000, *, seed: int = 0) -> tuple[float, float]:
    """The paper's test (a reproduction; every (item, seed) pair is a unit, so with run-to-run variance it rejects a
    true null far above its nominal rate): (mean difference b - a, two-sided p), the paper's paired sign-flip
    test over the pairs where both are finite: each of `n` permutations swaps the two arms' labels of
    every pair with probability 1/2, and p = (1 + #{|D_perm| >= |D_obs|}) / (1 + n)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired_permutation: {a.shape} and {b.shape} are not aligned")
    d = (b - a)[np.isfinite(a) & np.isfinite(b)]
    if not d.size:
        return float("nan"), float("nan")
    observed = d.mean()
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(n, d.size))
    perm = (signs * d).mean(axis=1)
    # a permuted mean equal to the observed one up to rounding counts as reaching it
    extreme = np.abs(perm) >= np.abs(observed) - 1e-12 * max(1.0, abs(observed))
    return float(observed), float((1 + extreme.sum()) / (1 + n))


def seed_sd(x, strata=None, *, ddof: int = 1) -> float:
    """The standard deviation over seeds of an arm's macro aggregate (ddof = 1, the unbiased variance):
    x [I, S] per-(item, seed) scores; NaN with fewer than ddof + 1 seeds."""
    x = np.asarray(x, np.float64)
    if x.ndim != 2:
        raise ValueError(f"seed_sd: expected [items, seeds] scores, got shape {x.shape}")
    per_seed = _per_seed_macro(x, _strata_index(strata, x.shape[0]))
    return float(np.std(per_seed, ddof=ddof)) if len(per_seed) > ddof else float("nan")
