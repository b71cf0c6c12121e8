"""Evaluation during training (config.eval): the policy at step 0, every `eval.every` steps and at the last step,
on a validation split (for choosing the best step) and the reported test tasks, into <workdir>/evals.jsonl.

    sets = eval_sets(run)                                    once: validation and test tasks, OOD benchmarks
    lines = evaluate_step(run, sets, step)                   the engine's current policy; one line per split
    per_step = read_evals(workdir)                           {step: {"validation": ..., "test": ..., "ood": ...}}
    evaluate_checkpoints(config, workdir)                    every kept checkpoint, after training (eval.every=0)

The validation tasks are disjoint from the test tasks: `eval.validation` (a task file), else a fixed share of each
domain's held-out tasks chosen by a hash of the task id (the same split for every run and arm). Every split is
scored as eval.evaluate scores it: bare prompts, `num_samples` responses per task, one sampling seed for every step,
so two steps differ only by their weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax import build
from harnessrl_jax.jsonl import read_objects
from harnessrl_jax.eval import ood as ood_lib
from harnessrl_jax.eval.evaluate import eval_tasks, evaluate, restore_policy
from harnessrl_jax.rl.checkpoint import Checkpointer
from harnessrl_jax.rubric.schema import Task
from harnessrl_jax.settings import EvalSection, section

EVALS_FILE = "evals.jsonl"
SPLITS = ("validation", "test")

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class EvalSets:
    """What each evaluated step is scored on."""

    validation: tuple[Task, ...]
    test: tuple[Task, ...]
    over_budget: Mapping[str, Mapping[str, int]]  # split -> domain -> tasks whose prompt exceeds the limit
    ood: Mapping[str, str]  # OOD benchmark -> path
    settings: EvalSection


def split_validation(tasks: Sequence[Task], share: float) -> tuple[list[Task], list[Task]]:
    """(validation, test): per domain, the round(share * n) tasks (at least one of a domain with two or more) first
    by sha256 of their id; the choice depends on the ids only, so every run and arm gets the same split."""
    by_domain: dict[str, list[Task]] = {}
    for t in tasks:
        by_domain.setdefault(t.domain, []).append(t)
    chosen: set[str] = set()
    for group in by_domain.values():
        k = min(len(group) - 1, max(1, round(share * len(group)))) if len(group) > 1 else 0
        ranked = sorted(group, key=lambda t: hashlib.sha256(t.id.encode()).hexdigest())
        chosen.update(t.id for t in ranked[:k])
    return [t for t in tasks if t.id in chosen], [t for t in tasks if t.id not in chosen]


def eval_sets(run, settings: EvalSection | None = None) -> EvalSets:
    """The validation and test tasks of `run`'s config.eval (or `settings`), each within its prompt limit."""
    s = settings or section(run.config, "eval")
    limit = s.max_prompt_len or run.config.max_prompt_len
    tasks, over = eval_tasks(run, s.split, s.heldout, max_prompt_len=limit)
    if s.validation:
        validation, over_v = eval_tasks(run, s.split, s.validation, max_prompt_len=limit)
        shared = sorted({t.id for t in validation} & {t.id for t in tasks})
        if shared:
            raise ValueError(f"config.eval.validation={s.validation!r} shares {len(shared)} tasks with the reported "
                             f"held-out tasks (e.g. {shared[:3]}): the best step must be chosen on other tasks")
        test, over_t = tasks, over
    else:
        validation, test = split_validation(tasks, s.validation_share)
        if not validation:
            raise ValueError(f"config.eval: {len(tasks)} held-out tasks leave none for validation (a domain needs two "
                             f"tasks); give config.eval.validation=FILE.jsonl")
        over_v, over_t = {}, over  # one file: its over-budget count is reported with the test split
    return EvalSets(tuple(validation), tuple(test), {"validation": over_v, "test": over_t},
                    ood_lib.parse_specs(s.ood), s)


def _split_line(step: int, split: str, result, over: Mapping[str, int]) -> dict[str, Any]:
    return {"step": step, "split": split, "task_ids": list(result.task_ids), "domains": list(result.domains),
            "seed_rubric": _list(result.seed_rubric), "oracle": _list(result.oracle),
            "macro": {"seed_rubric": _num(result.macro("seed_rubric")), "oracle": _num(result.macro("oracle"))},
            "over_budget": dict(over), "num_samples": result.num_samples, "seconds": result.seconds}


def evaluate_step(run, sets: EvalSets, step: int, *, judge=None, progress=None) -> list[dict[str, Any]]:
    """The engine's current policy (the weights of `step`) on each split and the OOD benchmarks: evals.jsonl's
    lines. `judge` scores WritingBench (eval.ood.judge_from_config)."""
    s = sets.settings
    n = s.num_samples or run.config.num_generations
    lines = []
    for split in SPLITS:
        tasks = getattr(sets, split)
        result = evaluate(run, tasks, num_samples=n, seed=s.seed)
        lines.append(_split_line(step, split, result, sets.over_budget[split]))
    if sets.ood:
        start = time.perf_counter()
        block = ood_lib.evaluate_ood(run, sets.ood, num_samples=s.ood_samples or n, seed=s.seed, judge=judge,
                                     max_new_tokens=s.ood_max_new_tokens or None)
        scores = {name: {k: v for k, v in r.items() if k not in ("per_item", "path")}
                  for name, r in block.items() if name != "aggregate"}
        lines.append({"step": step, "split": "ood", "benchmarks": scores, "aggregate": block["aggregate"],
                      "seconds": time.perf_counter() - start})
    if progress is not None:
        v, t = lines[0]["macro"]["seed_rubric"], lines[1]["macro"]["seed_rubric"]
        progress(f"eval step {step}: validation {_fmt(v)}, test {_fmt(t)} (macro, {len(sets.validation)} + "
                 f"{len(sets.test)} tasks x {n}, {sum(x['seconds'] for x in lines):.0f} s)"
                 + (f", OOD {_fmt(lines[2]['aggregate'])}" if sets.ood else ""))
    return lines


def ood_judge(config):
    """The judge WritingBench needs when config.eval.ood has it (eval.ood.judge_from_config), else None."""
    return ood_lib.judge_from_config(config) if "writingbench" in ood_lib.parse_specs(section(config, "eval").ood) \
        else None


def due(step: int, every: int, total_steps: int) -> bool:
    """Whether the policy after `step` updates is evaluated: step 0, every `every` steps and the last (every > 0)."""
    return every > 0 and (step == 0 or step % every == 0 or step == total_steps)


class EvalLog:
    """<workdir>/evals.jsonl, appended per evaluated step; lines of steps after a resumed run's checkpoint are cut
    (they are evaluated again, from the same weights)."""

    def __init__(self, workdir: str, keep_through: int):
        self.path = os.path.join(workdir, EVALS_FILE)
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                kept = [line for line in f if line.strip() and json.loads(line)["step"] <= keep_through]
            with open(f"{self.path}.tmp", "w", encoding="utf-8") as f:
                f.writelines(kept)
            os.replace(f"{self.path}.tmp", self.path)

    def steps(self) -> set[int]:
        return set(read_evals(os.path.dirname(self.path)))

    def write(self, lines: Sequence[Mapping[str, Any]]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")


def read_evals(workdir: str) -> dict[int, dict[str, dict[str, Any]]]:
    """{step: {split: line}} of a run's evals.jsonl ({} without one); per-task scores as float arrays."""
    path = os.path.join(workdir, EVALS_FILE)
    out: dict[int, dict[str, dict[str, Any]]] = {}
    if not os.path.exists(path):
        return out
    for _, x in read_objects(path):
        for key in ("seed_rubric", "oracle"):
            if key in x:
                x[key] = np.array([np.nan if v is None else v for v in x[key]], np.float64)
        out.setdefault(int(x["step"]), {})[x["split"]] = x
    return out


def evaluate_checkpoints(config, workdir: str, *, progress=None) -> dict[int, dict[str, dict[str, Any]]]:
    """Step 0 and every kept checkpoint of a run not yet in its evals.jsonl, evaluated as during training (for a
    run trained with eval.every = 0: only the checkpoints max_to_keep left are candidates); returns read_evals."""
    log_ = EvalLog(workdir, keep_through=10**9)
    done = log_.steps()
    with Checkpointer(os.path.join(workdir, "checkpoints")) as ckpt:
        steps = [s for s in [0] + ckpt.all_steps() if s not in done]
    if steps:
        run = build.setup(config)
        judge = ood_judge(config)
        try:
            sets = eval_sets(run)
            for step in steps:
                restore_policy(run, workdir, step)
                log_.write(evaluate_step(run, sets, step, judge=judge, progress=progress))
        finally:
            run.close()
            if judge is not None:
                judge.close()
    return read_evals(workdir)


def _list(x) -> list[float | None]:
    return [_num(v) for v in np.asarray(x, np.float64)]


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.1f}"


__all__ = ["EVALS_FILE", "EvalLog", "EvalSets", "due", "eval_sets", "evaluate_checkpoints", "evaluate_step",
           "read_evals", "split_validation"]
