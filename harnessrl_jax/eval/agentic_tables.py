"""Tables of the agentic comparison: per method and harness (the held-out one included) the mean score, pass@k and
pass^k over the held-out tasks, each with a run-level interval over the seeds, and the difference to a baseline
method (eval.stats.run_level_test); reads each run's agentic_eval.json (methods.agentic.evaluate)."""

from __future__ import annotations

import json
import os
from typing import Mapping, Sequence

import numpy as np
from scipy import stats as scipy_stats

from harnessrl_jax.eval.harness_arms import pass_rates
from harnessrl_jax.eval.stats import run_level_test
from harnessrl_jax.methods.agentic import EVAL_FILE

METRICS = ("mean", "pass@k", "pass^k")


def read_eval(run_dir: str) -> dict:
    path = os.path.join(run_dir, EVAL_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file (the run did not reach its last step)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def task_scores(result: Mapping, harness: str) -> dict[str, np.ndarray]:
    """Per held-out task under `harness`: the mean score (reward / 100), pass@k and pass^k."""
    r = np.asarray(result["rewards"][harness], np.float64)
    at, every = pass_rates(r, result["pass_threshold"])
    return {"mean": np.nanmean(r, axis=1) / 100.0, "pass@k": at, "pass^k": every}


def grid(results: Sequence[Mapping], harness: str, metric: str) -> np.ndarray:
    """[tasks, seeds] of one metric, one column per run (the runs must share their tasks)."""
    tasks = results[0]["tasks"]
    for r in results[1:]:
        if r["tasks"] != tasks:
            raise ValueError("the runs were evaluated on different held-out tasks")
    return np.stack([task_scores(r, harness)[metric] for r in results], axis=1)


def run_interval(x: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """(mean, half-width) over the runs of x [tasks, seeds]: Student's t over the per-seed means."""
    per_seed = np.nanmean(x, axis=0)
    if per_seed.size < 2 or np.allclose(per_seed, per_seed[0]):
        return float(per_seed.mean()), 0.0 if per_seed.size >= 2 else float("nan")
    t = scipy_stats.t.ppf(0.5 + level / 2, per_seed.size - 1)
    return float(per_seed.mean()), float(t * per_seed.std(ddof=1) / np.sqrt(per_seed.size))


def table(results: Mapping[str, Sequence[Mapping]], harnesses: Sequence[str], baseline: str | None = None) -> str:
    """A markdown table: a row per (method, harness), the three metrics as mean +- run-level half-width, and the
    mean score's difference to `baseline` with its run-level interval and p."""
    lines = ["| method | harness | mean score | pass@k | pass^k | mean - baseline [95% CI], p |",
             "| --- | --- | --- | --- | --- | --- |"]
    for method, runs in results.items():
        for h in harnesses:
            cells = []
            for m in METRICS:
                mean, half = run_interval(grid(runs, h, m))
                cells.append(f"{mean:.3f} +- {half:.3f}")
            vs = ""
            if baseline and method != baseline and baseline in results:
                d, lo, hi, p = run_level_test(grid(results[baseline], h, "mean"), grid(runs, h, "mean"))
                vs = f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}], p={p:.2f}"
            lines.append(f"| {method} | {h} | " + " | ".join(cells) + f" | {vs} |")
    return "\n".join(lines)


__all__ = ["METRICS", "grid", "read_eval", "run_interval", "table", "task_scores"]
