"""Interval estimates and tests for evaluation tables: percentile bootstrap of a mean and of paired differences, the
item x seed bootstrap of a macro aggregate's margin (`paired_bootstrap_grid`), the paired sign-flip permutation test
(`paired_permutation`) and the seed standard deviation of a macro aggregate (`seed_sd`) of specs/methods.md 4.7.

Evaluation scores are per task (a task's mean over its J samples), so the resampling unit is the task: tasks are
the independent draws, the samples within a task are not. Paired comparisons (two methods or two checkpoints on
the same tasks and seeds) resample the per-task differences, which removes the between-task variance both share.
"""

from __future__ import annotations

import numpy as np


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


def macro_mean(x, strata=None) -> float:
    """The mean over strata of each stratum's mean over its finite (item, seed) cells: the paper's macro aggregate
    (every domain or benchmark weighs the same, whatever its number of items). x: [I, S] or [I]."""
    x = np.asarray(x, np.float64)
    x = x[:, None] if x.ndim == 1 else x
    means = [np.nanmean(x[idx]) for idx in _strata_index(strata, x.shape[0]) if np.isfinite(x[idx]).any()]
    return float(np.mean(means)) if means else float("nan")


def paired_bootstrap_grid(a, b, strata=None, n: int = 10_000, *, seed: int = 0, level: float = 0.95
                          ) -> tuple[float, float, float]:
    """(diff, low, high): the macro aggregate of b minus that of a (methods.md 4.7), with a percentile interval from
    `n` resamples that draw items with replacement within each stratum (so the strata keep their weights) and,
    crossed with them, seeds with replacement; both arms are aggregated on the same draws.

    a, b: [I, S] per-(item, seed) scores of two arms on the same items and seeds (NaN: missing, left out of means);
    strata: [I] labels (a domain or benchmark per item), None for one stratum."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.ndim == 1:
        a, b = a[:, None], b[:, None] if b.ndim == 1 else b
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"paired_bootstrap_grid: {a.shape} and {b.shape} are not aligned [items, seeds] arrays")
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
    """(mean difference b - a, two-sided p): the paired sign-flip test of methods.md 4.7 over the pairs where both
    are finite: each of `n` permutations swaps the two arms' labels of every pair with probability 1/2, and
    p = (1 + #{|D_perm| >= |D_obs|}) / (1 + n)."""
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
    """The standard deviation over seeds of an arm's macro aggregate (methods.md 4.7; ddof = 1, AMB-4.15):
    x [I, S] per-(item, seed) scores; NaN with fewer than ddof + 1 seeds."""
    x = np.asarray(x, np.float64)
    if x.ndim != 2:
        raise ValueError(f"seed_sd: expected [items, seeds] scores, got shape {x.shape}")
    per_seed = [macro_mean(x[:, s], strata) for s in range(x.shape[1])]
    return float(np.std(per_seed, ddof=ddof)) if len(per_seed) > ddof else float("nan")
