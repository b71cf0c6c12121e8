"""Any set of arms (a method with config overrides) over the same seeds, budget and sampling seeds, into one
directory: held-out score under the seed rubrics and the oracle, the papers' statistics, steps to the best checkpoint.

    python launch/compare.py --base_config=experiments/smollm2_cpu.py --seeds=0,1,2 --out=runs/compare \\
        --arm=grpo --arm=harnessrl --arm=no_critic=method=harnessrl,harness.no_critic=true
    python launch/compare.py --preset=paper ...        every method, the ablation and the replacement rows

An arm is `NAME` (a registered method, or an arm of the preset) or `NAME=KEY=VALUE,KEY=VALUE` (dotted config keys).
Every arm keeps the base config's budget (overriding it is an error) and, per seed, the same config.seed, and trains
into OUT/<name>-s<seed>; a run whose scores are saved (compare_scores.json) is not trained or evaluated again, so a
stopped comparison resumes. Each run's seed policy and kept checkpoints are evaluated on the held-out tasks
(--heldout, or --eval_split of a bundled set) with bare prompts, J samples per task, one sampling seed.

compare.json holds every checkpoint's per-task scores, the tasks' domains, the arms and, per score (final
checkpoint; best checkpoint, optimistic): the legacy two-arm row, and `stats`: per arm the macro aggregate, its
domain means, its seed SD (ddof = 1), and against --reference the margin with the crossed item x seed bootstrap
(eval.stats.paired_bootstrap_grid) and the sign-flip permutation p. experiments/notebooks/ print the tables.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import shutil
import sys
import time

import jax
import numpy as np
from absl import flags, logging
from ml_collections import config_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402

config_flags.DEFINE_config_file("base_config", os.path.join(REPO, "experiments", "smollm2_cpu.py:method=harnessrl"),
                                "Base config (experiments/*.py[:arg]); each arm's method, overrides and seed go on it.")
flags.DEFINE_string("out", "runs/compare", "Directory of the runs and compare.json.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (>= 3 for the paper's protocol).")
flags.DEFINE_list("methods", ["grpo", "harnessrl"], "One arm per method, when no --arm or --preset is given.")
flags.DEFINE_multi_string("arm", [], "An arm: NAME or NAME=KEY=VALUE,KEY=VALUE (see the module docstring).")
flags.DEFINE_string("preset", "", "'paper': every method, the ablation rows and the interface-replacement rows.")
flags.DEFINE_string("reference", "", "The arm the others are compared with in `stats` (default: 'harnessrl' when "
                    "present, else the last arm).")
flags.DEFINE_string("eval_split", "heldout", "Split of a bundled set to evaluate on ('train' = the training tasks, "
                    "the only split of a source without a held-out file).")
flags.DEFINE_string("heldout", "", "The held-out task JSONL file (required for a task-file source).")
flags.DEFINE_integer("eval_seed", 10_000, "Sampling seed of every evaluation (the same for every checkpoint).")
flags.DEFINE_integer("bootstrap", 10_000, "Bootstrap resamples over items and seeds (the papers: 10,000).")
flags.DEFINE_integer("permutations", 10_000, "Permutations of the paired sign-flip test.")
flags.DEFINE_bool("keep_checkpoints", True, "Keep each run's checkpoints after its evaluation (False: delete them "
                  "once its scores are saved; a 135M policy's checkpoints take ~1.6 GB each).")
FLAGS = flags.FLAGS

# The paper's arms: the main table's methods, SEC alone (a supplementary row: the paper uses it only as a sampling
# rule), the ablation rows and the interface replacements.
PAPER_ARMS = {
    "grpo": "method=grpo", "ruscarl": "method=ruscarl", "skillrl": "method=skillrl", "evorubric": "method=evorubric",
    "amaris": "method=amaris", "amaris_pp": "method=amaris_pp", "sec": "method=sec", "harnessrl": "method=harnessrl",
    "harnessrl_no_critic": "method=harnessrl,harness.no_critic=true",
    "harnessrl_no_critic_no_memory": "method=harnessrl,harness.no_critic=true,harness.no_memory=true",
    "harnessrl_g": "method=harnessrl,harness.only_guidance=true",
    "harnessrl_c": "method=harnessrl,harness.only_rubric=true",
    "harnessrl_sec_sampling": "method=harnessrl,harness.sampling_rule=sec",
    "harnessrl_ruscarl_guidance": "method=harnessrl,harness.guidance_rule=ruscarl",
    "harnessrl_evorubric_rubric": "method=harnessrl,harness.rubric_rule=evorubric",
}
# Labelled variants of paper rows, by name only (not in --preset=paper): RuscaRL's off-context update with the
# truncated importance correction, and the EvoRubric replacement with the critic measuring its updates.
VARIANT_ARMS = {
    "ruscarl_tis": "method=ruscarl,ruscarl.tis_cap=2.0",
    "harnessrl_evorubric_rubric_gated": "method=harnessrl,harness.rubric_rule=evorubric,harness.gate_replaced_rule=true",
}
# What every arm shares: an override of these would change the budget or the sampling seeds.
BUDGET_KEYS = ("total_steps", "tasks_per_step", "num_generations", "max_new_tokens", "max_prompt_len", "seed",
               "temperature", "optim.total_steps", "mini_batches")


def parse_arm(spec: str) -> tuple[str, dict[str, str]]:
    """'NAME' or 'NAME=KEY=VALUE,...' -> (name, {key: value}); a bare NAME is a preset arm or a method."""
    from harnessrl_jax import methods

    name, _, rest = spec.partition("=")
    name = name.strip()
    if not name:
        raise ValueError(f"--arm={spec!r}: no arm name")
    if not rest:
        rest = {**PAPER_ARMS, **VARIANT_ARMS}.get(name) or (f"method={name}" if name in methods.METHODS else "")
        if not rest:
            raise ValueError(f"--arm={spec!r}: {name!r} is neither a method ({sorted(methods.METHODS)}) nor a "
                             f"preset or variant arm ({sorted(PAPER_ARMS) + sorted(VARIANT_ARMS)}); give its "
                             f"overrides as NAME=KEY=VALUE,...")
    overrides = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"--arm={spec!r}: {part!r} is not KEY=VALUE")
        if key.strip() in BUDGET_KEYS:
            raise ValueError(f"--arm={spec!r}: {key!r} is shared by every arm (same budget and sampling seeds); "
                             f"set it on --base_config instead")
        overrides[key.strip()] = value.strip()
    return name, overrides


def apply_overrides(config, overrides: dict[str, str]):
    """A copy of `config` with the overrides set, each value of the type the config holds there."""
    config = copy.deepcopy(config)  # keeps field references (optim.total_steps -> total_steps)
    with config.unlocked():
        for key, value in overrides.items():
            *path, last = key.split(".")
            node = config
            for p in path:
                node = node[p]
            if last not in node:
                raise ValueError(f"arm override {key}={value}: the base config has no {key!r}")
            old = node[last]
            if isinstance(old, bool):
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(f"arm override {key}={value}: expected true or false")
                node[last] = value.lower() in ("true", "1")
            elif isinstance(old, (int, float)) and not isinstance(old, bool):
                node[last] = type(old)(value)
            else:
                node[last] = value
    if "method" in overrides and "advantage" not in overrides:  # what its paper fixes beyond its parts
        from experiments import base

        base.apply_method_defaults(config)
    return config


def arms_from_flags() -> dict[str, dict[str, str]]:
    specs = list(FLAGS.arm)
    if FLAGS.preset:
        if FLAGS.preset != "paper":
            raise ValueError(f"--preset={FLAGS.preset!r}: known presets: paper")
        specs = list(PAPER_ARMS) + specs
    if not specs:
        specs = list(FLAGS.methods)
    arms = {}
    for spec in specs:
        name, overrides = parse_arm(spec)
        if name in arms:
            raise ValueError(f"arm {name!r} is given twice")
        arms[name] = overrides
    return arms


def evaluate_run(config, workdir, seed_policy: dict | None = None) -> dict[int, dict[str, np.ndarray]]:
    """Per evaluated step (0 = the seed policy, then every kept checkpoint): per-task held-out seed-rubric and
    oracle scores [T], every step with the same sampling seed. `seed_policy` is step 0's result when another arm
    of the same seed already evaluated it (the same initial policy). The last checkpoint's evaluation is also the
    run's eval.json (as launch/eval.py writes it)."""
    from harnessrl_jax import build
    from harnessrl_jax.eval.evaluate import eval_tasks, evaluate, restore_policy, save_eval, split_label
    from harnessrl_jax.rl.checkpoint import Checkpointer

    run = build.setup(config)  # the engine starts with the seed policy's weights
    tasks = eval_tasks(run, FLAGS.eval_split, FLAGS.heldout)
    with Checkpointer(os.path.join(workdir, "checkpoints")) as ckpt:
        steps = [0] + ckpt.all_steps()
    out = {}
    for step in steps:
        if step == 0 and seed_policy is not None:
            out[0] = seed_policy
            continue
        restore_policy(run, workdir, step)
        r = evaluate(run, tasks, num_samples=config.num_generations, seed=FLAGS.eval_seed)
        out[step] = {"seed_rubric": r.seed_rubric, "oracle": r.oracle, "task_ids": list(r.task_ids),
                     "domains": list(r.domains)}
        if step == steps[-1]:
            save_eval(os.path.join(workdir, "eval.json"), r, step=step,
                      split=split_label(config, FLAGS.eval_split, FLAGS.heldout),
                      model=config.model_name, seed=FLAGS.eval_seed)
        logging.info("  step %d: held-out %.1f, oracle %.1f (%d tasks x %d, %.0f s)", step,
                     np.nanmean(r.seed_rubric), np.nanmean(r.oracle), len(tasks), r.num_samples, r.seconds)
    run.close()
    return out


SCORES_FILE = "compare_scores.json"
METRICS = ("seed_rubric", "oracle")


def save_scores(workdir: str, per_step: dict[int, dict]) -> None:
    """The run's per-step evaluation, so a resumed comparison need not train or evaluate it again."""
    out = {str(k): {q: np.asarray(v[q]).tolist() if q in METRICS else v[q] for q in v} for k, v in per_step.items()}
    tmp = os.path.join(workdir, SCORES_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(out, f)
    os.replace(tmp, os.path.join(workdir, SCORES_FILE))


def load_scores(workdir: str) -> dict[int, dict] | None:
    path = os.path.join(workdir, SCORES_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        saved = json.load(f)
    return {int(k): {q: np.asarray(v[q], np.float64) if q in METRICS else v[q] for q in v} for k, v in saved.items()}



def paired_row(results, arms, pick: str, metric: str, n: int) -> dict[str, float]:
    """Mean per arm and the paired bootstrap interval of last - first, at the `pick` ('final' | 'best') step,
    paired by seed and task."""
    from harnessrl_jax.eval.stats import paired_bootstrap

    row = {m: float(np.nanmean([r[pick][metric] for r in results[m].values()])) for m in arms}
    base, new = arms[0], arms[-1]
    a = np.concatenate([results[base][s][pick][metric] for s in results[base]])
    b = np.concatenate([results[new][s][pick][metric] for s in results[base]])
    row["diff"], row["ci_low"], row["ci_high"] = paired_bootstrap(a, b, n)
    return row


def main(argv):
    del argv
    import launch.train as train
    from harnessrl_jax.eval import arm_tables, tables

    arms = arms_from_flags()
    names = list(arms)
    reference = FLAGS.reference or ("harnessrl" if "harnessrl" in arms else names[-1])
    if reference not in arms:
        raise ValueError(f"--reference={reference!r} is not an arm ({names})")
    configs = {name: apply_overrides(FLAGS.base_config, ov) for name, ov in arms.items()}
    os.makedirs(FLAGS.out, exist_ok=True)
    results: dict[str, dict[int, dict]] = {m: {} for m in names}
    runs = [(int(seed), name) for seed in FLAGS.seeds for name in names]
    seed_policy: dict[int, dict] = {}
    domains = task_ids = None
    start, trained = time.perf_counter(), 0
    for n, (seed, name) in enumerate(runs):
        config = copy.deepcopy(configs[name])
        with config.unlocked():
            config.seed = seed
        workdir = os.path.join(FLAGS.out, f"{name}-s{seed}")
        logging.info("run %d/%d: %s (%s) seed %d -> %s", n + 1, len(runs), name, config.method, seed, workdir)
        per_step = load_scores(workdir)
        if per_step is None:
            train.train(config, workdir)
            per_step = evaluate_run(config, workdir, seed_policy.get(seed))
            save_scores(workdir, per_step)
            trained += 1
            jax.clear_caches()  # one process trains every arm: free each run's compiled steps and buffers
            gc.collect()
            if not FLAGS.keep_checkpoints:
                shutil.rmtree(os.path.join(workdir, "checkpoints"), ignore_errors=True)
        else:
            logging.info("  scores saved by an earlier comparison: %s", os.path.join(workdir, SCORES_FILE))
        seed_policy.setdefault(seed, per_step[0])
        domains, task_ids = per_step[0]["domains"], per_step[0]["task_ids"]
        best = max(per_step, key=lambda s: np.nanmean(per_step[s]["seed_rubric"]))
        final = max(per_step)
        results[name][seed] = {"best_step": best, "final_step": final, "best": per_step[best],
                               "final": per_step[final], "per_step": per_step}
        elapsed = time.perf_counter() - start
        logging.info("%s seed %d: best step %d, held-out %.1f, oracle %.1f; %d/%d runs in %.0f min, ETA %.0f min",
                     name, seed, best, np.nanmean(per_step[best]["seed_rubric"]),
                     np.nanmean(per_step[best]["oracle"]), n + 1, len(runs), elapsed / 60,
                     elapsed / max(trained, 1) * (len(runs) - n - 1) / 60)  # runs resumed from scores cost ~0

    table = {f"{pick}/{metric}": paired_row(results, names, pick, metric, FLAGS.bootstrap)
             for pick in ("final", "best") for metric in ("seed_rubric", "oracle")}
    table["seed_policy"] = {metric: float(np.nanmean([r["per_step"][0][metric] for r in results[names[0]]
                                                      .values()])) for metric in ("seed_rubric", "oracle")}
    table["steps_to_best"] = {m: [r["best_step"] for r in results[m].values()] for m in names}
    table["per_step"] = {m: {str(s): {str(k): {q: np.asarray(v[q]).tolist() for q in ("seed_rubric", "oracle")}
                                      for k, v in r["per_step"].items()} for s, r in results[m].items()}
                         for m in names}
    table["tasks"] = {"ids": task_ids, "domains": domains}
    table["arms"] = {m: {"method": configs[m].method, "overrides": arms[m],
                         "rule_fallback": arm_tables.rule_fallback(configs[m])} for m in names}
    table["reference"] = reference
    table["stats"] = arm_tables.arm_stats(table, reference=reference, n_boot=FLAGS.bootstrap,
                                      n_perm=FLAGS.permutations)
    table["config"] = FLAGS.base_config.to_dict()
    with open(os.path.join(FLAGS.out, "compare.json"), "w") as f:
        json.dump(table, f, indent=2, default=str)
    print(f"seed policy (step 0): held-out {table['seed_policy']['seed_rubric']:.1f}, "
          f"oracle {table['seed_policy']['oracle']:.1f}")
    print(tables.markdown(arm_tables.main_rows(table, names)))


if __name__ == "__main__":
    cli.run(main)
