"""Evaluates a run's checkpoint on held-out tasks and OOD benchmarks and writes `eval.json` into the run directory.

    python launch/eval.py --config=experiments/smollm2_cpu.py --workdir=runs/grpo            # latest checkpoint
    python launch/eval.py --config=experiments/smollm2_cpu.py --workdir=runs/grpo --step=0   # the seed policy
    python launch/eval.py --config=... --workdir=... --heldout=rubric_mix_10k/heldout.jsonl \
        --ood=medqa=DATA/medqa/test.jsonl,gpqa=DATA/gpqa_diamond.csv,rolebench=DATA/RoleBench,\
ifbench=DATA/IFBench_test.jsonl,writingbench=DATA/benchmark_all.jsonl

With bare prompts: in-domain (harnessrl_jax.eval.evaluate; --heldout, or --split of a bundled set: a task file
without --heldout is an error, never the training set in disguise), OOD (harnessrl_jax.eval.ood, --ood=NAME=PATH),
and under harness arms (harnessrl_jax.eval.harness_arms, --arms=plain,persona_roleplay: mean, pass@J and pass^J at
--pass_threshold, default config.bandit.pass_threshold). eval.json (or --out) is written atomically:

    {"step", "split", "config", "tasks", "num_samples", "seed_rubric": {"mean", "ci95"}, "oracle": {...},
     "per_domain": {...}, "taxonomy": {...}, "taxonomy_counts", "per_task", "response_tokens_mean", "seconds",
     "ood": {NAME: {"score", <sub-scores>, "items", "num_samples", "path", "per_item", ...}, "aggregate"}}
"""

from __future__ import annotations

import json
import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.errors import UserError  # noqa: E402

config_flags.DEFINE_config_file("config", None, "Experiment config file (experiments/*.py[:arg]).", lock_config=True)
flags.DEFINE_string("workdir", None, "Run directory (its checkpoints/); eval.json goes here unless --out.")
flags.DEFINE_integer("step", None, "Checkpoint step to evaluate (default: the latest; 0: the seed policy).")
flags.DEFINE_string("split", "heldout", "Split of a bundled set ('train' = the training tasks; 'none' = no "
                    "in-domain evaluation).")
flags.DEFINE_string("heldout", "", "The held-out task JSONL file (required for a task-file source).")
flags.DEFINE_integer("num_samples", None, "Responses per task (default: config.num_generations).")
flags.DEFINE_list("ood", [], "OOD benchmarks as NAME=PATH (medqa, gpqa, rolebench, ifbench, writingbench).")
flags.DEFINE_integer("ood_samples", None, "Responses per OOD item (default: --num_samples).")
flags.DEFINE_integer("ood_max_new_tokens", None, "Token budget of OOD answers (default: config.max_new_tokens).")
flags.DEFINE_integer("seed", 10_000, "Sampling seed (the same seed for every checkpoint compared).")
flags.DEFINE_string("out", "", "Output path (default: WORKDIR/eval.json).")
flags.DEFINE_list("arms", [], "Harness arms to evaluate under (methods.arms names or snapshot:PATH; 'heldout' is "
                  "config.bandit.heldout_arm): mean, pass@J, pass^J.")
flags.DEFINE_float("pass_threshold", None, "Reward a response passes at, for pass@J / pass^J (default: "
                   "config.bandit.pass_threshold).")
flags.mark_flags_as_required(["config", "workdir"])
FLAGS = flags.FLAGS


def run_eval(config, workdir: str, *, step: int | None = None, split: str = "heldout", heldout: str = "",
             num_samples: int | None = None, ood=(), ood_samples: int | None = None,
             ood_max_new_tokens: int | None = None, seed: int = 10_000, out: str = "", arms=(),
             pass_threshold: float | None = None) -> dict:
    """Evaluates and writes the eval.json; returns its content."""
    from harnessrl_jax import build, checks, methods
    from harnessrl_jax.eval.evaluate import eval_tasks, evaluate, restore_policy, save_eval, split_label
    from harnessrl_jax.eval import ood as ood_lib

    specs = ood_lib.parse_specs(ood)
    if split == "none" and not specs:
        raise UserError("--split=none evaluates nothing in-domain: give --ood benchmarks")
    if split == "none" and arms:
        raise UserError("--arms evaluates the in-domain tasks under each arm: not with --split=none")
    bandit = methods.settings(config, "bandit")
    arms = [bandit.heldout_arm if a == "heldout" else a for a in arms]
    from harnessrl_jax.methods.arms import check_names

    if check_names(arms):
        raise UserError("--arms: " + "; ".join(check_names(arms)))
    threshold = bandit.pass_threshold if pass_threshold is None else float(pass_threshold)
    n = num_samples or config.num_generations
    out = out or os.path.join(workdir, "eval.json")
    checks.validate(config)
    run = build.setup(config)
    judge = ood_lib.judge_from_config(config) if "writingbench" in specs else None
    try:
        step = restore_policy(run, workdir, step)
        result = label = arm_blocks = None
        if split != "none":
            tasks = eval_tasks(run, split, heldout)
            label = split_label(config, split, heldout)
            logging.info("evaluating step %d on %d tasks x %d samples (%s)", step, len(tasks), n, label)
            result = evaluate(run, tasks, num_samples=n, seed=seed, progress=logging.info)
            if arms:
                from harnessrl_jax.eval.harness_arms import evaluate_arm

                arm_blocks = {a: evaluate_arm(run, tasks, a, num_samples=n, seed=seed, threshold=threshold)
                              for a in arms}
        ood_block = ood_lib.evaluate_ood(run, specs, num_samples=ood_samples or n, seed=seed, judge=judge,
                                         max_new_tokens=ood_max_new_tokens, progress=logging.info) if specs else None
    finally:
        run.close()
        if judge is not None:
            judge.close()
    extra = {"ood": ood_block} if ood_block is not None else {}
    if arm_blocks:
        extra["arms"] = arm_blocks
    if result is not None:
        return save_eval(out, result, step=step, split=label, model=config.model_name, seed=seed, extra=extra)
    return save_json(out, {"step": step, "split": None, "config": config.model_name, "seed": seed, **extra})


def save_json(path: str, content: dict) -> dict:
    """Writes `content` as JSON atomically; returns it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(f"{path}.tmp", "w", encoding="utf-8") as f:
        json.dump(content, f, indent=1)
        f.write("\n")
    os.replace(f"{path}.tmp", path)
    return content


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    s = run_eval(FLAGS.config, FLAGS.workdir, step=FLAGS.step, split=FLAGS.split, heldout=FLAGS.heldout,
                 num_samples=FLAGS.num_samples, ood=FLAGS.ood, ood_samples=FLAGS.ood_samples,
                 ood_max_new_tokens=FLAGS.ood_max_new_tokens, seed=FLAGS.seed, out=FLAGS.out, arms=FLAGS.arms,
                 pass_threshold=FLAGS.pass_threshold)

    def fmt(x):
        return "n/a" if x["mean"] is None else f"{x['mean']:.1f} [{x['ci95'][0]:.1f}, {x['ci95'][1]:.1f}]"

    if "seed_rubric" in s:
        print(f"step {s['step']}, {s['tasks']} tasks x {s['num_samples']} samples ({s['split']})")
        print(f"{'':<22}{'seed rubric':>24}{'oracle':>24}")
        print(f"{'all':<22}{fmt(s['seed_rubric']):>24}{fmt(s['oracle']):>24}")
        for d, r in s["per_domain"].items():
            print(f"{d:<22}{fmt(r['seed_rubric']):>24}{fmt(r['oracle']):>24}")
        print("criteria: " + ", ".join(f"{k} {v:.1%}" for k, v in s["taxonomy"].items() if v is not None))
    for name, r in (s.get("arms") or {}).items():
        print(f"arm {name:<20} mean {r['mean'] if r['mean'] is None else round(r['mean'], 1)}, "
              f"pass@{r['num_samples']} {r['pass_at_j']}, pass^{r['num_samples']} {r['pass_all_j']} "
              f"(reward >= {r['threshold']:g})")
    for name, r in (s.get("ood") or {}).items():
        if name != "aggregate":
            subs = ", ".join(f"{k} {100 * v:.1f}%" if k.endswith("_share") else f"{k} {v:.1f}" for k, v in r.items()
                             if k not in ("score", "items", "num_samples", "seconds") and isinstance(v, float))
            score = "n/a" if r["score"] is None else f"{r['score']:.1f}"
            print(f"ood {name:<14}{score:>8}  ({r['items']} items x {r['num_samples']}{'; ' + subs if subs else ''})")
    if s.get("ood"):
        agg = s["ood"]["aggregate"]
        print(f"ood aggregate     {'n/a' if agg is None else f'{agg:.1f}':>8}")
    print(f"written: {FLAGS.out or os.path.join(FLAGS.workdir, 'eval.json')}")


if __name__ == "__main__":
    cli.run(main)
