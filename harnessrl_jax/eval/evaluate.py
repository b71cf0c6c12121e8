"""Evaluation of a policy on a task split: the score under the seed rubrics, the oracle score, and the criterion
failure taxonomy, per task, per domain and overall.

    result = evaluate(run, tasks, num_samples=8, seed=0)     run: build.setup(config), engine holding the policy
    result.summary()                                          the dict launch/eval.py writes as eval.json

The policy answers each task's bare prompt (evaluation sees the policy, not the harness) J times with the config's
sampling settings and the given seed, so two checkpoints differ only by their weights. seed_rubric is the reward
under the seed criteria by the run's judge (LLM criteria left out without an LLM judge); oracle the reward under
the task's rule `oracle_rubrics`; the taxonomy labels each judged criterion blind (never met), saturated (always
met) or discriminative over the J samples (a pitfall is met when avoided). Per-task means are the units for
intervals (eval.stats).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from typing import Any, Sequence

import numpy as np

from harnessrl_jax import build
from harnessrl_jax.eval.oracle import rule_oracle_scores
from harnessrl_jax.eval.stats import bootstrap_mean, macro_mean
from harnessrl_jax.harness.render import render_prompt
from harnessrl_jax.rl.checkpoint import Checkpointer
from harnessrl_jax.rubric.reward import satisfied
from harnessrl_jax.rubric.schema import Task
from harnessrl_jax.stages import push_weights, sample_groups, score_responses

TAXONOMY = ("blind", "saturated", "discriminative")


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """Per-task arrays [T] (task means over J samples) and the per-criterion taxonomy counts."""

    task_ids: tuple[str, ...]
    domains: tuple[str, ...]
    seed_rubric: np.ndarray
    oracle: np.ndarray
    taxonomy: dict[str, int]
    num_samples: int
    response_tokens: float  # mean generated tokens per response
    seconds: float

    def macro(self, name: str = "seed_rubric") -> float:
        """The mean of the domain means of a score (the papers' aggregate); NaN without a finite score."""
        return macro_mean(getattr(self, name), np.asarray(self.domains))

    def summary(self, *, bootstrap: int = 2000) -> dict[str, Any]:
        """Means with 95% bootstrap intervals over tasks, per domain and overall; per-task scores; taxonomy shares."""
        def scores(mask):
            out = {}
            for name in ("seed_rubric", "oracle"):
                m, lo, hi = bootstrap_mean(getattr(self, name)[mask], bootstrap)
                out[name] = {"mean": _num(m), "ci95": [_num(lo), _num(hi)]}
            return out

        domains = sorted(set(self.domains))
        total = sum(self.taxonomy.values())
        return {"tasks": len(self.task_ids), "num_samples": self.num_samples,
                "macro": {name: _num(self.macro(name)) for name in ("seed_rubric", "oracle")},
                **scores(np.ones(len(self.task_ids), bool)),
                "per_domain": {d: {"tasks": int(sum(x == d for x in self.domains)),
                                   **scores(np.array([x == d for x in self.domains]))} for d in domains},
                "taxonomy": {k: (self.taxonomy[k] / total if total else None) for k in TAXONOMY},
                "taxonomy_counts": dict(self.taxonomy), "response_tokens_mean": self.response_tokens,
                "seconds": self.seconds,
                "per_task": {t: {"seed_rubric": _num(s), "oracle": _num(o)}
                             for t, s, o in zip(self.task_ids, self.seed_rubric, self.oracle)}}


def _row_means(x: np.ndarray) -> np.ndarray:
    """Per-row mean over finite entries; NaN for a row with none."""
    ok = np.isfinite(x)
    return np.where(ok.any(axis=1), np.where(ok, x, 0.0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1), np.nan)


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def taxonomy_counts(tasks: Sequence[Task], scores: Sequence[np.ndarray]) -> dict[str, int]:
    """Criteria by pass rate over their group: blind / saturated / discriminative (criteria with no verdict are
    not counted)."""
    counts = dict.fromkeys(TAXONOMY, 0)
    for task, S in zip(tasks, scores):
        for c, row in zip(task.criteria, S):
            sat = satisfied(row, c.points)
            sat = sat[~np.isnan(sat)]
            if not sat.size:
                continue
            rate = sat.mean()
            counts["blind" if rate == 0 else "saturated" if rate == 1 else "discriminative"] += 1
    return counts


TRAIN_SPLITS = ("train", "")  # the names that ask for the training tasks themselves


def split_label(config, split: str = "heldout", path: str = "") -> str:
    """What eval_tasks(run, split, path) evaluates on, for the record: the held-out file, '<set>/<split>' of a
    bundled set, or '<source>/train' when the training tasks themselves are evaluated."""
    if path:
        return path
    if config.tasks.source == "bundled":
        return f"{config.tasks.name}/{split or config.tasks.split}"
    if split in TRAIN_SPLITS:
        return f"{config.tasks.path or config.tasks.source}/train"
    return heldout_error(config, split)


def heldout_error(config, split: str):
    """Raises: a split asked of a task source that has no held-out file is an error, never the training set."""
    raise ValueError(f"config.tasks.source={config.tasks.source!r} has no {split!r} split of its own: pass the "
                     f"held-out task file explicitly (launch/eval.py --heldout=FILE.jsonl, launch/compare.py "
                     f"--heldout=FILE.jsonl), or ask for --split=train to evaluate on the training tasks")


def save_eval(path: str, result: EvalResult, *, step: int, split: str, model: str, seed: int,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Writes eval.json (launch/eval.py's schema, plus `extra` blocks such as "ood") atomically; returns its content."""
    summary = {"step": step, "split": split, "config": model, "seed": seed, **result.summary(), **(extra or {})}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return summary


def eval_tasks(run, split: str = "heldout", path: str = "", *, max_prompt_len: int | None = None
               ) -> tuple[list[Task], dict[str, int]]:
    """The tasks to evaluate for `run` and, per domain, how many were left out because their bare prompt exceeds
    `max_prompt_len` tokens (default config.max_prompt_len; evaluation may allow longer prompts than training, since
    its prompts carry no guidance). The tasks: the held-out JSONL file `path`; else split `split` of a bundled set;
    else, for split 'train' (or ''), the config's own training tasks. Any other split of a source without one (a
    task file, the toy tasks) is a ValueError: a held-out score is never computed on the training set by default."""
    config = run.config.copy_and_resolve_references()
    with config.unlocked():
        if path:
            config.tasks.source, config.tasks.path = "jsonl", path
        elif config.tasks.source == "bundled":
            if split:
                config.tasks.split = split
        elif split not in TRAIN_SPLITS:
            heldout_error(config, split)
    return prompt_budget(build.build_tasks(config), run.tokenizer, max_prompt_len or config.max_prompt_len)


def prompt_budget(tasks: Sequence[Task], tokenizer, max_prompt_len: int) -> tuple[list[Task], dict[str, int]]:
    """(the tasks whose bare prompt fits in `max_prompt_len` tokens, {domain: tasks over it}); the count is logged
    per domain, since a domain's held-out score without its long prompts is a score of another set."""
    lengths = [len(render_prompt(tokenizer, t.prompt, tokenize=True)) for t in tasks]
    kept = [t for t, n in zip(tasks, lengths) if n <= max_prompt_len]
    over: dict[str, int] = {}
    for t, n in zip(tasks, lengths):
        if n > max_prompt_len:
            over[t.domain] = over.get(t.domain, 0) + 1
    if over:
        logging.warning("evaluation: %d of %d tasks have a prompt over %d tokens and are not evaluated (by domain: "
                        "%s); raise config.eval.max_prompt_len to evaluate them", sum(over.values()), len(tasks),
                        max_prompt_len, ", ".join(f"{d} {k}" for d, k in sorted(over.items())))
    if not kept:
        raise ValueError(f"no evaluation task has a prompt within {max_prompt_len} tokens")
    return kept, over


def restore_policy(run, workdir: str, step: int | None) -> int:
    """Loads checkpoint `step` (None: the latest) of `workdir` into the run's engine; step 0 keeps the seed policy.
    Returns the step evaluated."""
    if step == 0:
        return 0
    directory = os.path.join(workdir, "checkpoints")
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no checkpoint under {directory}: train first, or --step=0 for the seed policy")
    with Checkpointer(directory) as ckpt:
        steps = ckpt.all_steps()
        if step is None:
            if not steps:
                raise FileNotFoundError(f"no checkpoint under {directory}: train first, or --step=0 for the seed "
                                        f"policy")
            step = max(steps)
        elif step not in steps:
            raise FileNotFoundError(f"{directory} has no checkpoint at step {step}; it has {sorted(steps)}")
        state, _, _ = ckpt.restore(run.trainer.abstract_state(), step)
    push_weights(run, run.trainer.policy_params(run.trainer.with_base(state, run.initial_params)))
    return step


def evaluate(run, tasks: Sequence[Task], *, num_samples: int, seed: int, batch_tasks: int = 16,
             progress=None) -> EvalResult:
    """The policy the run's engine holds, on `tasks` (see the module docstring); `progress` gets a line per batch."""
    if not tasks:
        raise ValueError("evaluate: no task")
    start = time.perf_counter()
    seed_rubric, oracle, scores, tokens = [], [], [], []
    for b in range(0, len(tasks), batch_tasks):
        batch = list(tasks[b:b + batch_tasks])
        groups = sample_groups(run, batch, seed=seed + 7919 * b, n=num_samples)  # bare prompts
        out, responses = groups.rollouts, groups.responses
        S, rewards, _ = score_responses(run.judge, batch, responses)
        seed_rubric.append(_row_means(rewards))
        oracle.append(_row_means(rule_oracle_scores(batch, responses)))
        scores += S
        tokens.append(np.asarray(out.lengths, np.float64))
        if progress is not None:
            done, elapsed = b + len(batch), time.perf_counter() - start
            progress(f"eval: {done}/{len(tasks)} tasks, {done * num_samples / elapsed:.1f} responses/s, "
                     f"ETA {elapsed / done * (len(tasks) - done):.0f} s")
    return EvalResult(tuple(t.id for t in tasks), tuple(t.domain for t in tasks), np.concatenate(seed_rubric),
                      np.concatenate(oracle), taxonomy_counts(tasks, scores), num_samples,
                      float(np.concatenate(tokens).mean()), time.perf_counter() - start)
