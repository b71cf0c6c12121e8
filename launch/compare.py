"""GRPO vs HarnessRL with the same seeds and budget: held-out score under the seed rubrics and oracle score, paired
bootstrap 95% intervals of the difference, steps to the best checkpoint. Not part of the tests (minutes per run).

    python launch/compare.py --base_config=experiments/smollm2_cpu.py --seeds=0,1,2 --out=runs/compare

For each seed, trains `grpo` and `harnessrl` into OUT/<method>-s<seed> (resuming what is there), then evaluates
every kept checkpoint on the held-out split (`config.tasks.split` -> --eval_split) with bare prompts (no guidance,
as evaluation sees the policy): J samples per task, scored by the seed rule criteria and the rule oracle criteria.
The best checkpoint per run (among those kept: config.checkpoint.max_to_keep) has the highest held-out
seed-rubric score; only rule criteria are scored (LLM criteria count as not judged); the table reports its scores,
and differences harnessrl - grpo are paired by seed and task (bootstrap over tasks x seeds). Writes compare.json.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from absl import app, flags, logging

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

flags.DEFINE_string("base_config", "experiments/smollm2_cpu.py", "Base config; method is set per run.")
flags.DEFINE_string("out", "runs/compare", "Directory of the runs and compare.json.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (>= 3 for the paper's protocol).")
flags.DEFINE_list("methods", ["grpo", "harnessrl"], "Methods; the last is compared against the first.")
flags.DEFINE_string("eval_split", "heldout", "Split of config.tasks.name to evaluate on ('' = the training tasks).")
flags.DEFINE_integer("steps", None, "Override config.total_steps (same budget for every run).")
flags.DEFINE_integer("bootstrap", 2000, "Bootstrap resamples.")
FLAGS = flags.FLAGS


def eval_tasks(config):
    from harnessrl_jax import loop

    if FLAGS.eval_split and config.tasks.source == "bundled":
        with config.unlocked():
            config.tasks.split = FLAGS.eval_split
    return loop.build_tasks(config)


def evaluate(config, workdir, tasks) -> dict[int, dict[str, np.ndarray]]:
    """Per kept checkpoint step: per-task mean held-out seed-rubric reward and oracle score [T]."""
    from harnessrl_jax import loop
    from harnessrl_jax.rl.checkpoint import Checkpointer

    run = loop.setup(config)
    prompts = loop.render_prompts(tasks, run.tokenizer)
    out = {}
    with Checkpointer(os.path.join(workdir, "checkpoints")) as ckpt:
        for step in ckpt.all_steps():
            state, _, _ = ckpt.restore(run.trainer.abstract_state(), step)
            run.engine.update_weights(loop.engine_params(state.params))
            rollouts = loop.generate_rollouts(run.engine, prompts, config, seed=10_000 + step)
            _, rewards, _ = loop.score_rollouts(tasks, rollouts, config.num_generations)
            responses = np.asarray(rollouts.texts, dtype=object).reshape(len(tasks), config.num_generations)
            oracle = loop.oracle_scores(tasks, responses)
            out[step] = {"seed_rubric": np.nanmean(rewards, axis=1), "oracle": np.nanmean(oracle, axis=1)}
    return out


def bootstrap_ci(diff: np.ndarray, n: int, rng) -> tuple[float, float, float]:
    """(mean, low, high) of the paired differences, 95% percentile bootstrap."""
    diff = diff[np.isfinite(diff)]
    if not diff.size:
        return float("nan"), float("nan"), float("nan")
    means = rng.choice(diff, (n, diff.size), replace=True).mean(axis=1)
    return float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main(argv):
    del argv
    import launch.train as train

    os.makedirs(FLAGS.out, exist_ok=True)
    results: dict[str, dict[int, dict]] = {m: {} for m in FLAGS.methods}
    for seed in map(int, FLAGS.seeds):
        for method in FLAGS.methods:
            config = train.load_config(FLAGS.base_config)
            with config.unlocked():
                config.method, config.seed, config.report = method, seed, True
                if FLAGS.steps:
                    config.total_steps = FLAGS.steps
            workdir = os.path.join(FLAGS.out, f"{method}-s{seed}")
            train.train(config, workdir)
            tasks = eval_tasks(config)
            per_step = evaluate(config, workdir, tasks)
            best = max(per_step, key=lambda s: np.nanmean(per_step[s]["seed_rubric"]))
            results[method][seed] = {"best_step": best, **per_step[best]}
            logging.info("%s seed %d: best step %d, held-out %.1f, oracle %.1f", method, seed, best,
                         np.nanmean(per_step[best]["seed_rubric"]), np.nanmean(per_step[best]["oracle"]))

    rng = np.random.default_rng(0)
    base, new = FLAGS.methods[0], FLAGS.methods[-1]
    table = {}
    for metric in ("seed_rubric", "oracle"):
        row = {m: float(np.nanmean([r[metric] for r in results[m].values()])) for m in FLAGS.methods}
        diff = np.concatenate([results[new][s][metric] - results[base][s][metric] for s in results[base]])
        row["diff"], row["ci_low"], row["ci_high"] = bootstrap_ci(diff, FLAGS.bootstrap, rng)
        table[metric] = row
    table["steps_to_best"] = {m: [r["best_step"] for r in results[m].values()] for m in FLAGS.methods}
    with open(os.path.join(FLAGS.out, "compare.json"), "w") as f:
        json.dump(table, f, indent=2)
    print(f"{'held-out':<14}" + "".join(f"{m:>12}" for m in FLAGS.methods) + f"{'diff [95% CI]':>28}")
    for metric in ("seed_rubric", "oracle"):
        r = table[metric]
        print(f"{metric:<14}" + "".join(f"{r[m]:>12.1f}" for m in FLAGS.methods)
              + f"{r['diff']:>10.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]")
    print(f"{'steps to best':<14}" + "".join(f"{str(table['steps_to_best'][m]):>12}" for m in FLAGS.methods))


if __name__ == "__main__":
    app.run(main)
