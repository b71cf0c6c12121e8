"""HarnessBandit against its mixtures over seeds: train each method from the same base config,
then evaluate the untrained and the final policy under a training arm and under the held-out arm.

    python launch/bandit_compare.py --base_config=experiments/tiny_cpu.py --seeds=0,1,2 --out=runs/bandit
    python launch/bandit_compare.py --base_config=experiments/smollm2_cpu.py --methods=harnessbandit,mixture

Each run goes to OUT/<method>-s<seed> (resumed if there); its evaluation to OUT/<method>-s<seed>/arms_eval.json:
{"final": {ARM: block}, "base": {ARM: block}} with eval.harness_arms blocks (mean, pass@J, pass^J at
config.bandit.pass_threshold) for --arms (default: 'plain', the PinchBench analogue, and config.bandit.heldout_arm,
the ClawEval analogue), J = --num_samples (3: ClawEval's three trials) with one sampling seed (--eval_seed) for
every policy. Tasks: --eval_split of a bundled set, or the held-out file --heldout (the toy source has none: its
training tasks, --eval_split=train). OUT/bandit_compare.json holds the table experiments/notebooks/harnessbandit
prints (eval.bandit_tables.comparison_rows) and each HarnessBandit run's terminal arm probabilities.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys

from absl import flags, logging
from ml_collections import config_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402

config_flags.DEFINE_config_file("base_config", os.path.join(REPO, "experiments", "tiny_cpu.py"),
                                "Base config; each run's method and seed go on it.")
flags.DEFINE_string("out", "runs/bandit_compare", "Directory of the runs and bandit_compare.json.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds.")
flags.DEFINE_list("methods", ["harnessbandit", "mixture", "mixture2"], "Methods to train.")
flags.DEFINE_list("arms", ["plain", "heldout"], "Arms to evaluate under ('heldout': config.bandit.heldout_arm).")
flags.DEFINE_integer("num_samples", 3, "J responses per task at evaluation (pass@J, pass^J).")
flags.DEFINE_string("eval_split", "heldout", "Split of a bundled set ('train': the training tasks).")
flags.DEFINE_string("heldout", "", "A held-out task JSONL file.")
flags.DEFINE_integer("eval_seed", 10_000, "Sampling seed of every evaluation.")
flags.DEFINE_bool("keep_checkpoints", True, "Keep each run's checkpoints after its evaluation.")
FLAGS = flags.FLAGS


def evaluate_policy(config, workdir: str, arms, step: int | None) -> dict:
    """{arm: eval.harness_arms block} for checkpoint `step` of workdir (0: the untrained policy)."""
    from harnessrl_jax import build, methods
    from harnessrl_jax.eval.evaluate import eval_tasks, restore_policy
    from harnessrl_jax.eval.harness_arms import evaluate_arm

    threshold = methods.settings(config, "bandit").pass_threshold
    run = build.setup(config)
    try:
        restore_policy(run, workdir, step)
        tasks = eval_tasks(run, FLAGS.eval_split, FLAGS.heldout)
        return {a: evaluate_arm(run, tasks, a, num_samples=FLAGS.num_samples, seed=FLAGS.eval_seed,
                                threshold=threshold) for a in arms}
    finally:
        run.close()


def main(argv):
    del argv
    import launch.train as train
    from experiments import base
    from harnessrl_jax import methods
    from harnessrl_jax.eval import bandit_tables, tables

    os.makedirs(FLAGS.out, exist_ok=True)
    heldout = methods.settings(FLAGS.base_config, "bandit").heldout_arm
    arms = [heldout if a == "heldout" else a for a in FLAGS.arms]
    base_eval = {}
    for seed in map(int, FLAGS.seeds):
        for method in FLAGS.methods:
            config = copy.deepcopy(FLAGS.base_config)
            with config.unlocked():
                config.method, config.seed = method, seed
                base.apply_method_defaults(config)
            workdir = os.path.join(FLAGS.out, f"{method}-s{seed}")
            path = os.path.join(workdir, bandit_tables.ARMS_EVAL)
            if not os.path.isfile(path):
                logging.info("%s seed %d -> %s", method, seed, workdir)
                train.train(config, workdir)
                if seed not in base_eval:  # one untrained policy per seed, whatever the method
                    base_eval[seed] = evaluate_policy(config, workdir, arms, 0)
                out = {"final": evaluate_policy(config, workdir, arms, None), "base": base_eval[seed]}
                with open(path + ".tmp", "w") as f:
                    json.dump(out, f, indent=1)
                os.replace(path + ".tmp", path)
                if not FLAGS.keep_checkpoints:
                    shutil.rmtree(os.path.join(workdir, "checkpoints"), ignore_errors=True)
            else:
                with open(path) as f:
                    base_eval.setdefault(seed, json.load(f)["base"])
    terminal = {d.rsplit("-", 1)[1]: bandit_tables.final_state(bandit_tables.history(os.path.join(FLAGS.out, d)))
                for d in sorted(os.listdir(FLAGS.out)) if d.startswith("harnessbandit-s")}  # every run so far
    rows = bandit_tables.comparison_rows(FLAGS.out)
    with open(os.path.join(FLAGS.out, "bandit_compare.json"), "w") as f:
        json.dump({"rows": rows, "terminal": terminal, "arms": arms, "num_samples": FLAGS.num_samples}, f, indent=1)
    print(tables.markdown(rows))
    for seed, state in terminal.items():
        print(f"harnessbandit {seed}: " + ", ".join(f"{r['arm']} p={r['p']:.3f} n={r['visits']}" for r in state))


if __name__ == "__main__":
    cli.run(main)
