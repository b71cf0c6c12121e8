"""Evaluation under a harness arm (HarnessBandit, sec. 5): the PinchBench analogue is a training arm
('plain', the bare prompt), the ClawEval analogue the held-out arm (config.bandit.heldout_arm) that no method
trained on. Per task, J responses under the arm's prompt, scored under the arm's rubric by the run's judge:

    mean        the mean reward (0-100) over tasks of the per-task mean over J
    pass@J      the share of tasks with at least one of J responses passing (reward >= threshold, 80 points)
    pass^J      the share of tasks whose J responses all pass

    block = evaluate_arm(run, tasks, "persona_roleplay", num_samples=3, seed=10_000, threshold=80.0)
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from harnessrl_jax.eval.stats import bootstrap_mean
from harnessrl_jax.methods.arms import arm, arm_criteria, arm_prompts
from harnessrl_jax.methods.guidance import PromptBudget
from harnessrl_jax.settings import section
from harnessrl_jax.stages import sample_groups, score_responses


def pass_rates(rewards, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(pass@J, pass^J) per task from rewards [T, J] (NaN: no reward; a task with none is NaN in both)."""
    r = np.asarray(rewards, np.float64)
    valid = np.isfinite(r)
    passed = valid & (r >= threshold)
    none = ~valid.any(axis=1)
    at = np.where(none, np.nan, passed.any(axis=1).astype(np.float64))
    # every valid response passes, and there is at least one
    every = np.where(none, np.nan, (passed | ~valid).all(axis=1).astype(np.float64))
    return at, every


def prompt_budget(run):
    """The prompt budget an arm gets at evaluation: the bare prompt limit plus the guidance budget, whatever the
    evaluated run's method (a bare-trained policy is evaluated under the same arm prompts)."""
    return PromptBudget(run.tokenizer, int(run.config.max_prompt_len)
                        + section(run.config, "harness").max_guidance_tokens)


def evaluate_arm(run, tasks: Sequence, arm_name: str, *, num_samples: int, seed: int, threshold: float,
                 batch_tasks: int = 16, bootstrap: int = 2000) -> dict[str, Any]:
    """The policy the run's engine holds on `tasks` under the arm (see the module docstring)."""
    spec, budget = arm(arm_name), prompt_budget(run)
    start = time.perf_counter()
    rewards, over = [], 0
    for b in range(0, len(tasks), batch_tasks):
        batch = list(tasks[b:b + batch_tasks])
        criteria = [t.criteria for t in batch]
        prompts = arm_prompts(spec, batch, criteria, budget)
        over += sum(p.over_budget for p in prompts)
        groups = sample_groups(run, batch, seed=seed + 7919 * b, n=num_samples, prompts=prompts)
        rewards.append(score_responses(run.judge, batch, groups.responses,
                                       arm_criteria(spec, batch, criteria))[1])
    r = np.concatenate(rewards)
    ok = np.isfinite(r)
    per_task = np.where(ok.any(axis=1), np.where(ok, r, 0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1), np.nan)
    at, every = pass_rates(r, threshold)
    mean, lo, hi = bootstrap_mean(per_task, bootstrap)
    return {"arm": arm_name, "tasks": len(tasks), "num_samples": num_samples, "threshold": float(threshold),
            "mean": _num(mean), "ci95": [_num(lo), _num(hi)], "pass_at_j": _num(np.nanmean(at)),
            "pass_all_j": _num(np.nanmean(every)), "over_budget": int(over),
            "seconds": time.perf_counter() - start,
            "per_task": {t.id: {"mean": _num(m), "pass_at_j": _num(a), "pass_all_j": _num(e)}
                         for t, m, a, e in zip(tasks, per_task, at, every)}}


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None
