"""Evaluates a run's checkpoint on held-out tasks and writes `eval.json` into the run directory.

    python launch/eval.py --config=experiments/smollm2_cpu.py --workdir=runs/grpo            # latest checkpoint
    python launch/eval.py --config=experiments/smollm2_cpu.py --workdir=runs/grpo --step=0   # the seed policy

Loads the config's model, restores the policy of checkpoint --step (default: the latest under
WORKDIR/checkpoints; 0: the config's initial weights, no checkpoint needed), and evaluates it with
harnessrl_jax.eval.evaluate: --num_samples responses per task from the bare prompts with the config's sampling
settings and --seed, scored under the seed rubrics by the config's judge and under the rule oracle rubrics, with
the criterion failure taxonomy. Tasks: --split of a bundled set (default 'heldout'; '' = the config's training
split) or --tasks=FILE.jsonl. eval.json (or --out) is written atomically:

    {"step", "split", "config", "tasks", "num_samples", "seed_rubric": {"mean", "ci95"}, "oracle": {...},
     "per_domain": {...}, "taxonomy": {"blind", "saturated", "discriminative"}, "taxonomy_counts", "per_task",
     "response_tokens_mean", "seconds"}
"""

from __future__ import annotations

import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli  # noqa: E402

config_flags.DEFINE_config_file("config", None, "Experiment config file (experiments/*.py[:arg]).", lock_config=True)
flags.DEFINE_string("workdir", None, "Run directory (its checkpoints/); eval.json goes here unless --out.")
flags.DEFINE_integer("step", None, "Checkpoint step to evaluate (default: the latest; 0: the seed policy).")
flags.DEFINE_string("split", "heldout", "Bundled task sets: the split to evaluate ('' = the config's).")
flags.DEFINE_string("tasks", "", "A task JSONL file to evaluate instead of a bundled split.")
flags.DEFINE_integer("num_samples", None, "Responses per task (default: config.num_generations).")
flags.DEFINE_integer("seed", 10_000, "Sampling seed (the same seed for every checkpoint compared).")
flags.DEFINE_string("out", "", "Output path (default: WORKDIR/eval.json).")
flags.mark_flags_as_required(["config", "workdir"])
FLAGS = flags.FLAGS


def run_eval(config, workdir: str, *, step: int | None = None, split: str = "heldout", tasks_path: str = "",
             num_samples: int | None = None, seed: int = 10_000, out: str = "") -> dict:
    """Evaluates and writes the eval.json; returns its content."""
    from harnessrl_jax import build, configs
    from harnessrl_jax.eval import eval_tasks, evaluate, restore_policy, save_eval, split_label

    configs.validate(config)
    run = build.setup(config)
    try:
        step = restore_policy(run, workdir, step)
        tasks = eval_tasks(run, split, tasks_path)
        n = num_samples or config.num_generations
        logging.info("evaluating step %d on %d tasks x %d samples", step, len(tasks), n)
        result = evaluate(run, tasks, num_samples=n, seed=seed, progress=logging.info)
    finally:
        run.close()
    return save_eval(out or os.path.join(workdir, "eval.json"), result, step=step,
                     split=split_label(config, split, tasks_path), model=config.model_name, seed=seed)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    s = run_eval(FLAGS.config, FLAGS.workdir, step=FLAGS.step, split=FLAGS.split, tasks_path=FLAGS.tasks,
                 num_samples=FLAGS.num_samples, seed=FLAGS.seed, out=FLAGS.out)

    def fmt(x):
        return "n/a" if x["mean"] is None else f"{x['mean']:.1f} [{x['ci95'][0]:.1f}, {x['ci95'][1]:.1f}]"

    print(f"step {s['step']}, {s['tasks']} tasks x {s['num_samples']} samples ({s['split']})")
    print(f"{'':<22}{'seed rubric':>24}{'oracle':>24}")
    print(f"{'all':<22}{fmt(s['seed_rubric']):>24}{fmt(s['oracle']):>24}")
    for d, r in s["per_domain"].items():
        print(f"{d:<22}{fmt(r['seed_rubric']):>24}{fmt(r['oracle']):>24}")
    print("criteria: " + ", ".join(f"{k} {v:.1%}" for k, v in s["taxonomy"].items() if v is not None))
    print(f"written: {FLAGS.out or os.path.join(FLAGS.workdir, 'eval.json')}")


if __name__ == "__main__":
    cli.run(main)
