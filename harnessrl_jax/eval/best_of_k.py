"""Best-of-K (CoCA's Figure 4): an item's score is the best of K sampled responses; reported for K in {1, 2, 4, 8,
16}. From n >= K samples per item the expected best of a uniformly random K-subset is exact (as pass@k is):

    E[max of K of n] = sum_i s_(i) C(i - 1, K - 1) / C(n, K),   s_(1) <= ... <= s_(n) the item's sorted scores

so one set of n = max K samples gives every K without resampling noise between the Ks. `best_of_k_stats` compares
arms with the training run as the unit (eval.stats.run_level_test); launch/coca_probe.py samples the scores."""

from __future__ import annotations

from math import comb
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax.eval.stats import macro_mean, run_level_test, seed_sd
from harnessrl_jax.stages import sample_groups, score_responses

KS = (1, 2, 4, 8, 16)  # CoCA's Figure 4


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


def per_item(scores: np.ndarray, k: int) -> np.ndarray:
    """[T]: each item's expected best of k from its scores [T, n] (NaN where fewer than k are finite)."""
    return np.array([expected_best_of_k(row, k) for row in np.asarray(scores, np.float64)], np.float64)


def best_of_k_stats(scores: Mapping[str, Mapping[int, np.ndarray]], domains: Sequence[str], *,
                    ks: Sequence[int] = KS, reference: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Per arm, one row per K: `macro` (eval.stats.macro_mean of the items' expected best of K over the arm's (item,
    seed) cells), `seed_sd` (its SD over seeds, ddof 1; None with one seed), `seeds`, and for arms other
    than `reference`, over the seeds both ran: `diff` (arm - reference, macro), `ci95_runs` and `p_runs`
    (run_level_test). `scores`: {arm: {seed: [T, n]}}, every array over the same items, in `domains` order."""
    domains = np.asarray(domains)

    def grid(runs, seeds, k):
        return np.stack([per_item(runs[s], k) for s in seeds], axis=1)

    out: dict[str, list[dict[str, Any]]] = {}
    for arm, runs in scores.items():
        rows = []
        for k in ks:
            g = grid(runs, sorted(runs), k)
            row: dict[str, Any] = {"k": int(k), "macro": _num(macro_mean(g, domains)),
                                   "seed_sd": _num(seed_sd(g, domains)), "seeds": int(g.shape[1])}
            paired = sorted(set(runs) & set(scores.get(reference, {})))
            if reference is not None and arm != reference and paired:
                diff, lo, hi, p = run_level_test(grid(scores[reference], paired, k), grid(runs, paired, k), domains)
                row.update(diff=_num(diff), ci95_runs=[_num(lo), _num(hi)], p_runs=_num(p),
                           paired_seeds=[int(s) for s in paired])
            rows.append(row)
        out[arm] = rows
    return out


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def sample_scores(run, tasks, *, n: int, seed: int) -> np.ndarray:
    """[T, n] rubric rewards under the seed criteria of n responses per task to its bare prompt, from the policy
    the run's engine holds (stages.sample_groups and stages.score_responses, as training and evaluation sample)."""
    groups = sample_groups(run, tasks, None, seed=seed, n=n)
    _, rewards, _ = score_responses(run.judge, tasks, groups.responses)
    return np.asarray(rewards, np.float64)


__all__ = ["KS", "best_of_k_curve", "best_of_k_stats", "expected_best_of_k", "per_item", "sample_scores"]
