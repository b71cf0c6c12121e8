"""CoCA's analyses of any run's checkpoints (its paper's state and transition tables, Best-of-K), the work of
launch/coca_probe.py:

- the dual-group probe: per checkpoint and training task, CoCA's Normal group (bare prompt, seed s) and Guided
  group (the whole rubric shown, seed s + 1), judged under the original rubric and diagnosed into the five states by
  CoCA's own functions (methods.coca.scheme), written as coca.jsonl lines (no calibration: no rewrites, rewards
  under C), so a baseline that never ran the two groups gets CoCA's state and transition tables (eval.coca_tables);
- Best-of-K: n = max K samples per held-out item (eval.best_of_k), one sampling seed for every checkpoint and arm.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import re
import time
from typing import Any, Callable, Sequence

import jax
import ml_collections
import numpy as np

from harnessrl_jax import build, methods
from harnessrl_jax.errors import UserError
from harnessrl_jax.eval import best_of_k
from harnessrl_jax.eval.evaluate import eval_tasks, restore_policy
from harnessrl_jax.eval.stats import macro_mean
from harnessrl_jax.eval.tables import read_jsonl, runs_in
from harnessrl_jax.methods.coca import CoCAConfig, achievement, select_frontiers
from harnessrl_jax.methods.coca.scheme import (both_groups, diagnose_groups, guided_prompts, state_fractions,
                                               visit_line)
from harnessrl_jax.methods.guidance import PromptBudget, load_template
from harnessrl_jax.rl.checkpoint import Checkpointer
from harnessrl_jax.settings import section
from harnessrl_jax.stages import sample_groups

SUMMARY = "coca_probe.json"
BEST_OF_K = "best_of_k.json"


# ---------------------------------------------------------------------------------------- one checkpoint


def probe_prompt_limit(config) -> int:
    """The prompt budget a CoCA run of this config has (build.guidance_budget of a method that mounts guidance): a
    baseline's own run keeps no room for the rubric, and its Guided prompts would be sampled bare."""
    return int(config.max_prompt_len) + section(config, "harness").max_guidance_tokens


def probe_step(run, tasks: Sequence, *, step: int, seed: int, settings: CoCAConfig, batch_tasks: int = 16,
               progress: Callable[[str], None] | None = None) -> tuple[list[dict], dict[str, float]]:
    """(coca.jsonl lines, metrics) of the policy the run's engine holds: both groups of every task, in batches."""
    g_n, g_g = settings.groups
    budget = PromptBudget(run.tokenizer, probe_prompt_limit(run.config))
    template = load_template(settings.guided_template)
    lines, states, r_n, r_g, over, cut, qualified = [], [], [], [], 0, 0, 0
    start = time.perf_counter()
    for b in range(0, len(tasks), batch_tasks):
        batch = list(tasks[b:b + batch_tasks])
        criteria = [list(t.criteria) for t in batch]
        normal = sample_groups(run, batch, None, seed=seed + 7919 * b, n=g_n)
        guided = sample_groups(run, batch, seed=seed + 7919 * b + 1, n=g_g,
                               prompts=guided_prompts(batch, criteria, template, budget))
        (S_n, rn), (S_g, rg), _ = both_groups(run.judge, batch, normal.responses, guided.responses, criteria)
        rates, batch_states = diagnose_groups(S_n, S_g, criteria, settings)
        for n, task in enumerate(batch):
            points = np.array([c.points for c in criteria[n]], np.float64)
            gate = select_frontiers(batch_states[n], achievement(S_g[n], points), rn[n], rg[n],
                                    margin=settings.frontier_margin)
            lines.append(visit_line(step, task, criteria[n], batch_states[n], rates[n], [], rn[n], rg[n], rn[n],
                                    gate))
            qualified += gate.qualified
        states += batch_states
        r_n.append(rn)
        r_g.append(rg)
        over += sum(guided.over_budget)
        cut += sum(guided.shortened)
        if progress is not None:
            done, elapsed = b + len(batch), time.perf_counter() - start
            progress(f"  probe: {done}/{len(tasks)} tasks, {done * (g_n + g_g) / elapsed:.1f} responses/s, "
                     f"ETA {elapsed / done * (len(tasks) - done):.0f} s")
    metrics = {**state_fractions(states), "probe/tasks": float(len(tasks)),
               "probe/reward_normal": float(np.nanmean(np.concatenate(r_n))),
               "probe/reward_guided": float(np.nanmean(np.concatenate(r_g))),
               "probe/qualified_share": qualified / len(tasks), "probe/guided_over_budget": float(over),
               "probe/guided_shortened": float(cut), "probe/seconds": time.perf_counter() - start}
    return lines, metrics


def best_of_k_scores(run, tasks: Sequence, *, n: int, seed: int, batch_tasks: int = 16,
                     progress: Callable[[str], None] | None = None) -> np.ndarray:
    """[T, n] rubric rewards of n samples per task (eval.best_of_k.sample_scores), in batches."""
    out, start = [], time.perf_counter()
    for b in range(0, len(tasks), batch_tasks):
        batch = list(tasks[b:b + batch_tasks])
        out.append(best_of_k.sample_scores(run, batch, n=n, seed=seed + 7919 * b))
        if progress is not None:
            done, elapsed = b + len(batch), time.perf_counter() - start
            progress(f"  best-of-K: {done}/{len(tasks)} items, {done * n / elapsed:.1f} responses/s, "
                     f"ETA {elapsed / done * (len(tasks) - done):.0f} s")
    return np.concatenate(out)


# ----------------------------------------------------------------------------------------- runs and files


@dataclasses.dataclass(frozen=True)
class ProbedRun:
    """One training run to probe: its arm, its seed and its directory."""

    arm: str
    seed: int
    workdir: str

    @property
    def name(self) -> str:
        return f"{self.arm}-s{self.seed}"


def run_config(workdir: str) -> ml_collections.ConfigDict:
    """The run's whole config, from its config.json."""
    path = os.path.join(workdir, "config.json")
    if not os.path.isfile(path):
        raise UserError(f"{workdir}: no config.json (launch/train.py writes it): not a training run")
    with open(path, encoding="utf-8") as f:
        return ml_collections.ConfigDict(json.load(f))


def find_runs(directory: str, arms: Sequence[str] = ()) -> list[ProbedRun]:
    """The runs of `directory`: itself when it is a run (arm: its method), else a compare directory's
    `<arm>-s<seed>` runs, only `arms` when given."""
    if not os.path.isdir(directory):
        raise UserError(f"--dir={directory}: no such directory")
    if os.path.isfile(os.path.join(directory, "config.json")):
        config = run_config(directory)
        found = {str(config.method): [ProbedRun(str(config.method), int(config.seed), directory)]}
    else:
        found = {arm: [ProbedRun(arm, int(re.fullmatch(r".+-s(\d+)", os.path.basename(d)).group(1)), d)
                       for d in dirs] for arm, dirs in runs_in(directory).items()}
    if not found:
        raise UserError(f"--dir={directory}: neither a run (config.json) nor a compare directory (<arm>-s<seed> "
                        f"runs)")
    unknown = [a for a in arms if a not in found]
    if unknown:
        raise UserError(f"--arms={','.join(arms)}: {', '.join(unknown)} not in {directory} (its arms: "
                        f"{', '.join(sorted(found))})")
    return [r for arm in (arms or sorted(found)) for r in found[arm]]


def probed_steps(workdir: str, steps: str) -> list[int]:
    """0 (the seed policy) and every kept checkpoint ('all'), the last one ('final'), or a comma list."""
    directory = os.path.join(workdir, "checkpoints")
    kept = []
    if os.path.isdir(directory):
        with Checkpointer(directory) as ckpt:
            kept = ckpt.all_steps()
    if steps == "all":
        wanted = [0] + kept
    elif steps == "final":
        wanted = kept[-1:]
    else:
        wanted = sorted({int(s) for s in steps.split(",") if s.strip()})
    missing = [s for s in wanted if s and s not in kept]
    if not kept and (missing or steps in ("all", "final")):
        raise UserError(f"--steps={steps}: no checkpoint under {directory} (a compare run with "
                        f"--keep_checkpoints=false has none left; --steps=0 probes the seed policy)")
    if missing:
        raise UserError(f"--steps={steps}: {directory} has no checkpoint at step {', '.join(map(str, missing))}; "
                        f"it has {', '.join(map(str, kept))}")
    return sorted(set(wanted))


def _write_json(path: str, content: Any) -> None:
    with open(f"{path}.tmp", "w", encoding="utf-8") as f:
        json.dump(content, f)
        f.write("\n")
    os.replace(f"{path}.tmp", path)


def _done(out: str) -> tuple[set[int], dict]:
    """The steps a run's probe finished (in metrics.jsonl and best_of_k.json), its files cut back to them."""
    bok_path = os.path.join(out, BEST_OF_K)
    bok = json.load(open(bok_path, encoding="utf-8")) if os.path.isfile(bok_path) else {"steps": {}}
    done = {m["step"] for m in read_jsonl(os.path.join(out, "metrics.jsonl"))} & {int(s) for s in bok["steps"]}
    for name in ("metrics.jsonl", "coca.jsonl"):
        kept = [x for x in read_jsonl(os.path.join(out, name)) if x["step"] in done]
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(x) + "\n" for x in kept)
    bok["steps"] = {s: v for s, v in bok["steps"].items() if int(s) in done}
    return done, bok


def probe_runs(runs: Sequence[ProbedRun], out: str, *, steps: str = "all", seed: int = 10_000, ks=best_of_k.KS,
               split: str = "heldout", heldout: str = "", probe_tasks: int = 0, batch_tasks: int = 16,
               reference: str = "", log: Callable[[str], None] = print) -> dict:
    """Probes every run's checkpoints into `out`/<arm>-s<seed>/ (coca.jsonl, metrics.jsonl, best_of_k.json; a
    rerun goes on from the checkpoints done) and writes `out`/coca_probe.json: the settings, the Best-of-K rows
    per arm at each run's last probed step (eval.best_of_k.best_of_k_stats) and each run's curve per step."""
    ks = tuple(sorted({int(k) for k in ks}))
    settings = {"seed": seed, "ks": list(ks), "n": ks[-1], "split": heldout or split, "probe_tasks": probe_tasks}
    os.makedirs(out, exist_ok=True)
    summary_path = os.path.join(out, SUMMARY)
    if os.path.isfile(summary_path):
        before = json.load(open(summary_path, encoding="utf-8"))["settings"]
        if before != settings:
            raise UserError(f"--out={out} holds a probe with other settings ({before}, now {settings}): give "
                            f"another --out, or delete it")
    _write_json(summary_path, {"settings": settings})
    plan = [(r, probed_steps(r.workdir, steps)) for r in runs]
    total, finished, start = sum(len(s) for _, s in plan), 0, time.perf_counter()
    finals: dict[str, dict[int, np.ndarray]] = {}
    curves: dict[str, dict[str, dict[str, float]]] = {}
    items: dict[str, Any] = {}
    for r, wanted in plan:
        run_out = os.path.join(out, r.name)
        os.makedirs(run_out, exist_ok=True)
        done, bok = _done(run_out)
        todo = [s for s in wanted if s not in done]
        finished += len(wanted) - len(todo)
        if todo:
            config = run_config(r.workdir)
            coca = methods.settings(config, "coca")
            run = build.setup(config)
            try:
                bok_tasks, _ = eval_tasks(run, split, heldout)
                tasks = run.tasks
                if 0 < probe_tasks < len(tasks):  # the same subset for every checkpoint and arm of this seed
                    keep = np.sort(np.random.default_rng(seed).choice(len(tasks), probe_tasks, replace=False))
                    tasks = [tasks[i] for i in keep]
                bok.update(task_ids=[t.id for t in bok_tasks], domains=[t.domain for t in bok_tasks])
                for step in todo:  # ascending: step 0 is the engine's weights as built
                    restore_policy(run, r.workdir, step)
                    log(f"{r.name} step {step}: probe of {len(tasks)} tasks x {coca.groups}, best-of-{ks[-1]} "
                        f"on {len(bok_tasks)} items")
                    lines, metrics = probe_step(run, tasks, step=step, seed=seed, settings=coca,
                                                batch_tasks=batch_tasks, progress=log)
                    scores = best_of_k_scores(run, bok_tasks, n=ks[-1], seed=seed + 2, batch_tasks=batch_tasks,
                                              progress=log)
                    domains = np.asarray(bok["domains"])
                    metrics.update({f"best_of_k/k{k}": macro_mean(best_of_k.per_item(scores, k), domains)
                                    for k in ks})
                    with open(os.path.join(run_out, "coca.jsonl"), "a", encoding="utf-8") as f:
                        f.writelines(json.dumps(x) + "\n" for x in lines)
                    bok["steps"][str(step)] = [[None if not np.isfinite(v) else float(v) for v in row]
                                               for row in scores]
                    _write_json(os.path.join(run_out, BEST_OF_K), bok)
                    with open(os.path.join(run_out, "metrics.jsonl"), "a", encoding="utf-8") as f:
                        f.write(json.dumps({"step": step, **metrics}) + "\n")  # last: the step is done
                    finished += 1
                    elapsed = time.perf_counter() - start
                    log(f"{r.name} step {step}: saturated {metrics['coca/frac_saturated']:.2f}, learnable "
                        f"{metrics['coca/frac_learnable']:.2f}, best-of-1 {metrics['best_of_k/k1']:.1f}, "
                        f"best-of-{ks[-1]} {metrics[f'best_of_k/k{ks[-1]}']:.1f}; {finished}/{total} checkpoints "
                        f"in {elapsed / 60:.1f} min, ETA {elapsed / max(finished, 1) * (total - finished) / 60:.1f}"
                        f" min")
            finally:
                run.close()
                jax.clear_caches()  # one process probes every run: free each one's compiled programs
                gc.collect()
        last = str(max(wanted))
        finals.setdefault(r.arm, {})[r.seed] = np.array(bok["steps"][last], np.float64)
        curves.setdefault(r.arm, {})[str(r.seed)] = {
            s: {f"k{k}": m[f"best_of_k/k{k}"] for k in ks}
            for s, m in ((str(x["step"]), x) for x in read_jsonl(os.path.join(run_out, "metrics.jsonl")))}
        if items and items["task_ids"] != bok["task_ids"]:
            raise UserError(f"{r.workdir}: its held-out items differ from the other runs' (another task set or "
                            f"prompt budget): probe it on its own --out")
        items = {"task_ids": bok["task_ids"], "domains": bok["domains"]}
    if reference and reference not in finals:
        raise UserError(f"--reference={reference}: not a probed arm ({', '.join(sorted(finals))})")
    summary = {"settings": settings, "reference": reference or None, "items": items,
               "final_steps": {r.name: max(s) for r, s in plan},
               "best_of_k": best_of_k.best_of_k_stats(finals, items["domains"], ks=ks, reference=reference or None),
               "curves": curves}
    _write_json(summary_path, summary)
    return summary


__all__ = ["BEST_OF_K", "ProbedRun", "SUMMARY", "best_of_k_scores", "find_runs", "probe_prompt_limit",
           "probe_runs", "probe_step", "probed_steps", "run_config"]
