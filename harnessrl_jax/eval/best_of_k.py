"""Best-of-K (CoCA's Figure 4): an item's score is the best of K sampled responses; reported for K in {1, 2, 4, 8,
16}. From n >= K samples per item the expected best of a uniformly random K-subset is exact (as pass@k is):

    E[max of K of n] = sum_i s_(i) C(i - 1, K - 1) / C(n, K),   s_(1) <= ... <= s_(n) the item's sorted scores

so one set of n = max K samples gives every K without resampling noise between the Ks."""

from __future__ import annotations

from math import comb
from typing import Sequence

import numpy as np

from harnessrl_jax.stages import sample_groups, score_responses


def expected_best_of_k(scores, k: int) -> float:
    """E[max over a random k-subset] of one item's scores (NaN entries dropped); NaN when fewer than k remain."""
    s = np.sort(np.asarray(scores, np.float64)[~np.isnan(np.asarray(scores, np.float64))])
    n = s.size
    if k < 1 or n < k:
        return float("nan")
    weights = np.array([comb(i, k - 1) for i in range(n)], np.float64) / comb(n, k)  # i = rank - 1
    return float(weights @ s)


def best_of_k_curve(scores: np.ndarray, ks: Sequence[int] = (1, 2, 4, 8, 16)) -> dict[int, float]:
    """{K: mean over items of the expected best of K} from scores [items, n]."""
    scores = np.asarray(scores, np.float64)
    return {k: float(np.nanmean([expected_best_of_k(row, k) for row in scores])) for k in ks}


def sample_scores(run, tasks, *, n: int, seed: int) -> np.ndarray:
    """[T, n] rubric rewards under the seed criteria of n responses per task to its bare prompt, from the policy
    the run's engine holds (stages.sample_groups and stages.score_responses, as training and evaluation sample)."""
    groups = sample_groups(run, tasks, None, seed=seed, n=n)
    _, rewards, _ = score_responses(run.judge, tasks, groups.responses)
    return np.asarray(rewards, np.float64)


__all__ = ["best_of_k_curve", "expected_best_of_k", "sample_scores"]
