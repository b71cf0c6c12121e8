"""Evaluation: a policy's held-out score under the seed rubrics and the oracle, and the criterion failure taxonomy
(`evaluate`); intervals and tests (`stats`); the OOD benchmarks (`ood`); the pairwise oracle (`oracle`, and
`oracle_run` over a run's groups) and reward-oracle agreement (`agreement`); the paper's tables from run
directories (`tables` and its siblings); the lm-evaluation-harness adapter (`lm_eval`). The submodules are imported
by name: `agreement`, `stats`, `oracle` and `ood` sit below the step's stages, the drivers above them."""
