"""GRPO vs HarnessRL with the same seeds and budget: held-out score under the seed rubrics and oracle score, paired
bootstrap 95% intervals of the difference, steps to the best checkpoint. Not part of the tests (minutes per run).

    python launch/compare.py --base_config=experiments/smollm2_cpu.py:method=harnessrl --seeds=0,1,2 --out=runs/compare \
        --base_config.total_steps=12 --base_config.checkpoint.every=4

Config overrides go as --base_config.KEY=VALUE (the same for every run; method and seed are set per run).
For each seed, trains `grpo` and `harnessrl` into OUT/<method>-s<seed> (resuming what is there), then evaluates
the seed policy (step 0) and every kept checkpoint on the held-out tasks (--heldout=FILE.jsonl, or split
--eval_split of a bundled set; a task file or toy source without --heldout is an error unless --eval_split=train)
with bare prompts (no guidance, as evaluation sees the policy) by harnessrl_jax.eval: J samples per task, one
sampling seed (--eval_seed) for every evaluation, scored under the seed rubrics by the config's judge (LLM
criteria not judged without config.judge.base_url) and under the rule oracle rubrics. Reported per method: the final checkpoint's scores (unbiased) and the best checkpoint's (highest
held-out seed-rubric score, so selected on the evaluation set: optimistic), with differences harnessrl - grpo
paired by seed and task (bootstrap over tasks x seeds), and the steps to the best checkpoint. Writes compare.json
with every checkpoint's per-task scores, and each run's final evaluation as its eval.json (launch/eval.py's
schema); experiments/notebooks/paper_tables.ipynb turns the directory into the paper's tables.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time

import numpy as np
from absl import flags, logging
from ml_collections import config_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402

config_flags.DEFINE_config_file("base_config", os.path.join(REPO, "experiments", "smollm2_cpu.py:method=harnessrl"),
                                "Base config (experiments/*.py[:arg]); method and seed are set per run.")
flags.DEFINE_string("out", "runs/compare", "Directory of the runs and compare.json.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (>= 3 for the paper's protocol).")
flags.DEFINE_list("methods", ["grpo", "harnessrl"], "Methods; the last is compared against the first.")
flags.DEFINE_string("eval_split", "heldout", "Split of a bundled set to evaluate on ('train' = the training tasks, "
                    "the only split of a source without a held-out file).")
flags.DEFINE_string("heldout", "", "The held-out task JSONL file (required for a task-file source).")
flags.DEFINE_integer("eval_seed", 10_000, "Sampling seed of every evaluation (the same for every checkpoint).")
flags.DEFINE_integer("bootstrap", 2000, "Bootstrap resamples.")
FLAGS = flags.FLAGS


def evaluate_run(config, workdir) -> dict[int, dict[str, np.ndarray]]:
    """Per evaluated step (0 = the seed policy, then every kept checkpoint): per-task held-out seed-rubric and
    oracle scores [T], every step with the same sampling seed. The last checkpoint's evaluation is also the run's
    eval.json (as launch/eval.py writes it)."""
    from harnessrl_jax import build
    from harnessrl_jax.eval import eval_tasks, evaluate, restore_policy, save_eval, split_label
    from harnessrl_jax.rl.checkpoint import Checkpointer

    run = build.setup(config)  # the engine starts with the seed policy's weights
    tasks = eval_tasks(run, FLAGS.eval_split, FLAGS.heldout)
    with Checkpointer(os.path.join(workdir, "checkpoints")) as ckpt:
        steps = [0] + ckpt.all_steps()
    out = {}
    for step in steps:
        restore_policy(run, workdir, step)
        r = evaluate(run, tasks, num_samples=config.num_generations, seed=FLAGS.eval_seed)
        out[step] = {"seed_rubric": r.seed_rubric, "oracle": r.oracle}
        if step == steps[-1]:
            save_eval(os.path.join(workdir, "eval.json"), r, step=step,
                      split=split_label(config, FLAGS.eval_split, FLAGS.heldout),
                      model=config.model_name, seed=FLAGS.eval_seed)
        logging.info("  step %d: held-out %.1f, oracle %.1f (%d tasks x %d, %.0f s)", step,
                     np.nanmean(r.seed_rubric), np.nanmean(r.oracle), len(tasks), r.num_samples, r.seconds)
    run.close()
    return out


def paired_row(results, methods, pick: str, metric: str, n: int) -> dict[str, float]:
    """Mean per method and the paired bootstrap interval of last - first, at the `pick` ('final' | 'best') step,
    paired by seed and task."""
    from harnessrl_jax.eval import paired_bootstrap

    row = {m: float(np.nanmean([r[pick][metric] for r in results[m].values()])) for m in methods}
    base, new = methods[0], methods[-1]
    a = np.concatenate([results[base][s][pick][metric] for s in results[base]])
    b = np.concatenate([results[new][s][pick][metric] for s in results[base]])
    row["diff"], row["ci_low"], row["ci_high"] = paired_bootstrap(a, b, n)
    return row


def main(argv):
    del argv
    import launch.train as train

    os.makedirs(FLAGS.out, exist_ok=True)
    results: dict[str, dict[int, dict]] = {m: {} for m in FLAGS.methods}
    runs = [(int(seed), method) for seed in FLAGS.seeds for method in FLAGS.methods]
    start = time.perf_counter()
    for n, (seed, method) in enumerate(runs):
        config = copy.deepcopy(FLAGS.base_config)  # keeps field references (optim.total_steps -> total_steps)
        with config.unlocked():
            config.method, config.seed = method, seed
        workdir = os.path.join(FLAGS.out, f"{method}-s{seed}")
        logging.info("run %d/%d: %s seed %d -> %s", n + 1, len(runs), method, seed, workdir)
        train.train(config, workdir)
        per_step = evaluate_run(config, workdir)
        best = max(per_step, key=lambda s: np.nanmean(per_step[s]["seed_rubric"]))
        final = max(per_step)
        results[method][seed] = {"best_step": best, "final_step": final, "best": per_step[best],
                                 "final": per_step[final], "per_step": per_step}
        elapsed = time.perf_counter() - start
        logging.info("%s seed %d: best step %d, held-out %.1f, oracle %.1f; %d/%d runs in %.0f min, ETA %.0f min",
                     method, seed, best, np.nanmean(per_step[best]["seed_rubric"]),
                     np.nanmean(per_step[best]["oracle"]), n + 1, len(runs), elapsed / 60,
                     elapsed / (n + 1) * (len(runs) - n - 1) / 60)

    table = {f"{pick}/{metric}": paired_row(results, FLAGS.methods, pick, metric, FLAGS.bootstrap)
             for pick in ("final", "best") for metric in ("seed_rubric", "oracle")}
    table["seed_policy"] = {metric: float(np.nanmean([r["per_step"][0][metric] for r in results[FLAGS.methods[0]]
                                                      .values()])) for metric in ("seed_rubric", "oracle")}
    table["steps_to_best"] = {m: [r["best_step"] for r in results[m].values()] for m in FLAGS.methods}
    table["per_step"] = {m: {str(s): {str(k): {q: v[q].tolist() for q in v} for k, v in r["per_step"].items()}
                             for s, r in results[m].items()} for m in FLAGS.methods}
    table["config"] = FLAGS.base_config.to_dict()
    with open(os.path.join(FLAGS.out, "compare.json"), "w") as f:
        json.dump(table, f, indent=2, default=str)
    print(f"seed policy (step 0): held-out {table['seed_policy']['seed_rubric']:.1f}, "
          f"oracle {table['seed_policy']['oracle']:.1f}")
    print(f"{'held-out score':<22}" + "".join(f"{m:>12}" for m in FLAGS.methods) + f"{'diff [95% CI]':>28}")
    for key in ("final/seed_rubric", "final/oracle", "best/seed_rubric", "best/oracle"):
        r = table[key]
        print(f"{key:<22}" + "".join(f"{r[m]:>12.1f}" for m in FLAGS.methods)
              + f"{r['diff']:>12.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]")
    print(f"{'steps to best':<22}" + "".join(f"{str(table['steps_to_best'][m]):>12}" for m in FLAGS.methods))


if __name__ == "__main__":
    cli.run(main)
