"""Evaluation: a policy's held-out score under the seed rubrics and the oracle, the criterion failure taxonomy
(`evaluate`), bootstrap intervals and the permutation test (`stats`), the OOD benchmarks (`ood`), the pairwise
oracle (`oracle`) and reward-oracle agreement (`agreement`), and the lm-evaluation-harness adapter (`lm_eval`).
`launch/eval.py` evaluates a run's checkpoint into eval.json; `launch/compare.py` compares methods over seeds with
paired intervals; `tables` builds the paper's tables from run directories."""

from harnessrl_jax.eval.evaluate import (TAXONOMY, EvalResult, eval_tasks, evaluate, restore_policy, save_eval,
                                          split_label, taxonomy_counts)
from harnessrl_jax.eval.stats import (bootstrap_mean, macro_mean, paired_bootstrap, paired_bootstrap_grid,
                                      paired_permutation, seed_sd)

__all__ = ["TAXONOMY", "EvalResult", "bootstrap_mean", "eval_tasks", "evaluate", "macro_mean", "paired_bootstrap",
           "paired_bootstrap_grid", "paired_permutation", "restore_policy", "save_eval", "seed_sd", "split_label",
           "taxonomy_counts"]
