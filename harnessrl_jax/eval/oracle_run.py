"""The pairwise oracle over a run's recorded groups (eval.oracle's judge): per step the pair classes and agreement
of the rewards the rollouts were trained on, and the oracle score of each response against anchor responses.

    summary = oracle_run("RUN", PairwiseOracle(client, store="RUN/oracle/oracle.sqlite"))   # -> RUN/oracle/
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Sequence

import ml_collections
import numpy as np

from harnessrl_jax import build
from harnessrl_jax.eval import agreement
from harnessrl_jax.eval.agreement import END_WINDOW
from harnessrl_jax.eval.oracle import PairwiseOracle, strict_json
from harnessrl_jax.failures import OutagePolicy
from harnessrl_jax.memory import RecordStore
from harnessrl_jax.rubric.schema import Task
from harnessrl_jax.stages import sample_groups



def run_tasks(workdir: str) -> dict[str, Task]:
    """The tasks of the run in `workdir` by id, rebuilt from its config.json (prompts and domains)."""
    with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
        config = ml_collections.ConfigDict(json.load(f))
    return {t.id: t for t in build.build_tasks(config)}


def recorded_draws(workdir: str, steps: Iterable[int] | None = None):
    """The run's recorded draws (memory.DrawRecord: step, task_id, responses, rewards, ...) in step order, read
    from its record store under <workdir>/memory."""
    path = os.path.join(workdir, "memory", RecordStore.FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{workdir} has no record store ({path}): the run kept no draws to judge")
    store = RecordStore(path)
    try:
        yield from store.draws(steps)
    finally:
        store.close()


def recorded_steps(workdir: str) -> list[int]:
    """The steps the run's record store has committed."""
    path = os.path.join(workdir, "memory", RecordStore.FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{workdir} has no record store ({path}): the run kept no draws to judge")
    store = RecordStore(path)
    try:
        return store.steps()
    finally:
        store.close()


def seed_anchors(workdir: str, task_ids: Sequence[str], *, seed: int = 20_000) -> dict[str, list[str]]:
    """The seed policy's J responses to each task's bare prompt (the run's config at its initial weights, its
    sampling settings, one fixed seed), cached in <workdir>/oracle/anchors.json so they are sampled once."""
    path = os.path.join(workdir, "oracle", "anchors.json")
    cached = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
    missing = [t for t in task_ids if t not in cached]
    if missing:
        with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
            config = ml_collections.ConfigDict(json.load(f))
        run = build.setup(config)
        try:
            by_id = {t.id: t for t in run.tasks}
            tasks = [by_id[t] for t in missing]
            texts = sample_groups(run, tasks, seed=seed).responses  # bare prompts, the config's sampling
            cached.update({t.id: list(map(str, row)) for t, row in zip(tasks, texts)})
        finally:
            run.close()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(f"{path}.tmp", "w", encoding="utf-8") as f:
            json.dump(cached, f, indent=1)
        os.replace(f"{path}.tmp", path)
    return {t: cached[t] for t in task_ids}


def parse_steps(text: str, recorded: Sequence[int] = ()) -> list[int] | None:
    """'476-500', '1,5,9' or 'last:25' (the last 25 of the `recorded` steps) -> the steps; '' -> None (all)."""
    text = text.strip()
    if not text:
        return None
    if text.startswith("last:"):
        try:
            n = int(text[5:])
        except ValueError:
            raise ValueError(f"steps {text!r}: 'last:N' needs an integer N") from None
        return sorted(recorded)[-n:] if n > 0 else []
    out = []
    for part in text.split(","):
        a, dash, b = part.partition("-")
        try:
            out += list(range(int(a), int(b) + 1)) if dash else [int(a)]
        except ValueError:
            raise ValueError(f"steps {text!r}: expected 'a-b', a comma list of steps or 'last:N'") from None
    return out


def draw_points(draw, task: Task) -> np.ndarray:
    """[K] points of the criteria `draw` was graded with: the harness slice it recorded (the rubric as it stood at
    that step), else the task's seed criteria by id; NaN for a criterion found in neither (left unjudged)."""
    recorded = (draw.harness or {}).get("criteria") or {}
    seed = {c.id: c.points for c in task.criteria}
    return np.array([float(recorded[c]["points"]) if c in recorded else float(seed.get(c, np.nan))
                     for c in draw.criterion_ids], np.float64)


def oracle_run(workdir: str, oracle: PairwiseOracle, *, steps: Iterable[int] | None = None,
               anchors: str = "seed", end_window: int = END_WINDOW, progress=None, outage=None) -> dict[str, Any]:
    """Judges every recorded group of the run (or those of `steps`): per step the pair classes and agreement
    (eval.agreement, `oracle/*` keys), the criterion classes of the groups as graded (`taxonomy/*`: each
    criterion's split against the oracle's verdicts on the pairs it separates) and, unless anchors='none', the
    mean oracle score (win rate against the
    seed policy's responses: anchors='seed'; or against each task's first recorded draw: 'first_draw').
    Writes <workdir>/oracle/oracle.jsonl (one line per step, with per-task scores) and oracle/summary.json
    (all steps, the last `end_window` steps, calls and tokens); returns the summary. `outage` is a
    failures.OutagePolicy (default: 2% of a step's calls may go unanswered, 3 retries 30 s apart): an oracle that
    stays down raises failures.ModelOutage instead of leaving the step's pairs out."""
    outage = outage or OutagePolicy(0.02, 30.0, 3, "--")
    if anchors not in ("seed", "first_draw", "none"):
        raise ValueError(f"anchors must be 'seed', 'first_draw' or 'none', got {anchors!r}")
    steps = None if steps is None else {int(s) for s in steps}
    tasks = run_tasks(workdir)
    by_step: dict[int, list] = {}
    first: dict[str, list[str]] = {}
    for d in recorded_draws(workdir):
        first.setdefault(d.task_id, list(d.responses))
        if steps is None or d.step in steps:
            by_step.setdefault(d.step, []).append(d)
    unknown = sorted({d.task_id for ds in by_step.values() for d in ds} - set(tasks))
    if unknown:
        raise ValueError(f"{workdir}: recorded draws of tasks its config does not build: {unknown[:5]}")
    anchor_set = {} if anchors == "none" else first if anchors == "first_draw" else \
        seed_anchors(workdir, sorted({d.task_id for ds in by_step.values() for d in ds}))
    out_dir = os.path.join(workdir, "oracle")
    os.makedirs(out_dir, exist_ok=True)
    lines, all_counts = [], []
    for step in sorted(by_step):
        draws = by_step[step]
        jobs = [PairwiseOracle.pair_jobs(tasks[d.task_id], d.responses) for d in draws]
        ajobs = [PairwiseOracle.anchor_jobs(tasks[d.task_id], d.responses, anchor_set[d.task_id])
                 if anchor_set else [] for d in draws]
        flat = oracle.verdicts_until_answered([j for js in jobs + ajobs for j in js], outage)
        counts, classes, per_task, scores = [], [], {}, []
        pos = 0
        for d, js in zip(draws, jobs):
            o = oracle.combine(len(d.responses), flat[pos:pos + len(js)])
            pos += len(js)
            counts.append(agreement.pair_counts(d.rewards, o))
            classes.append(agreement.criterion_counts(draw_points(d, tasks[d.task_id]), d.scores, o))
        for d, js in zip(draws, ajobs):
            if js:
                s = oracle.combine_anchors(len(d.responses), anchor_set[d.task_id], flat[pos:pos + len(js)])
                pos += len(js)
                per_task[d.task_id] = float(np.nanmean(s)) if np.isfinite(s).any() else None
                scores.append(s)
        total, criteria = agreement.total_counts(counts), agreement.total_counts(classes)
        all_counts.append((step, total, criteria))
        valid = np.concatenate(scores) if scores else np.array([])
        valid = valid[np.isfinite(valid)]
        line = {"step": step, "groups": len(draws), **agreement.agreement_metrics(total),
                **agreement.criterion_metrics(criteria),
                "oracle/score_mean": float(valid.mean()) if valid.size else None, "oracle/task_scores": per_task,
                "counts": total, "criteria": criteria}
        lines.append(line)
        if progress is not None:
            progress(f"oracle step {step}: {len(draws)} groups, agreement {line['oracle/agreement']:.3f}")
    with open(os.path.join(out_dir, "oracle.jsonl.tmp"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(strict_json(line)) + "\n")
    os.replace(os.path.join(out_dir, "oracle.jsonl.tmp"), os.path.join(out_dir, "oracle.jsonl"))
    def window(rows):
        rows = list(rows)
        return {**agreement.agreement_metrics(agreement.total_counts(c for _, c, _ in rows)),
                **agreement.criterion_metrics(agreement.total_counts(k for _, _, k in rows))}

    last = [r for r in all_counts if r[0] > all_counts[-1][0] - end_window] if all_counts else []
    summary = {"steps": len(lines), "groups": sum(line["groups"] for line in lines), "anchors": anchors,
               "all": window(all_counts), f"last_{end_window}_steps": window(last), "cost": oracle.report()}
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(strict_json(summary), f, indent=1)
    return summary


__all__ = ["draw_points", "oracle_run", "parse_steps", "recorded_draws", "recorded_steps", "run_tasks", "seed_anchors"]
