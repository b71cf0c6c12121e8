"""Interval estimates for evaluation tables: percentile bootstrap of a mean and of paired differences.

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
