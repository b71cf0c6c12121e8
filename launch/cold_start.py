"""Memory cold start: the seed policy over the training tasks -> cold_start.json (HarnessRL sec. 4.4).

    python launch/cold_start.py --config=experiments/smollm2_cpu.py:method=harnessrl --out=runs/cold_start.json
    python launch/train.py --config=experiments/smollm2_cpu.py:method=harnessrl --workdir=runs/h \
        --config.harness.cold_start=runs/cold_start.json

Loads the config's policy (the seed policy: config.model_name, no checkpoint), its training tasks as HarnessRL
trains them (without config.judge.base_url only rule criteria stay) and its judge; samples --groups independent
groups of J = config.num_generations responses per task from the bare prompts with the config's sampling
settings, grades them, grades the first group --regradings more times, and derives the gamma levels, both
acceptance bands, the task-saturation threshold and the anchors (harnessrl_jax.evolver.cold_start, which documents
every rule and the file's schema). A deterministic judge (the rule checkers) has no grading noise: the rubric
band's lower bound is then measured as 0. The file is written atomically; the summary is printed.

The raw score matrices go first to OUT with `.groups.jsonl` for `.json` (evolver.cold_start.save_seed_groups), so
a derivation that fails (a band whose null exceeds its upper bound: more groups or a larger J needed) or one with
other quantiles loses no sampling: `--from_groups=runs/cold_start.groups.jsonl` re-derives without the policy.
"""

from __future__ import annotations

import datetime
import os
import sys

import numpy as np
from absl import app, flags, logging
from ml_collections import config_flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.errors import UserError  # noqa: E402

config_flags.DEFINE_config_file("config", None, "Experiment config file (experiments/*.py[:arg]).", lock_config=True)
flags.DEFINE_string("out", None, "Path of the cold_start.json to write.")
flags.DEFINE_integer("groups", 4, "Independent groups per task (>= 2 to measure the guidance band's null).")
flags.DEFINE_integer("regradings", 2, "Extra gradings of each task's first group (the rubric band's null).")
flags.DEFINE_integer("batch_tasks", 8, "Tasks per generate call (x J rows).")
flags.DEFINE_integer("max_tasks", 0, "Measure a random subset of this many training tasks (0 = all).")
flags.DEFINE_string("from_groups", None, "Re-derive from a saved .groups.jsonl instead of sampling the policy.")
flags.mark_flags_as_required(["out"])
FLAGS = flags.FLAGS


def run_cold_start(config, out: str, *, groups: int = 4, regradings: int = 2, batch_tasks: int = 8,
                   max_tasks: int = 0):
    """Measures the seed policy of `config`, writes its score matrices (groups_path) and `out`; returns the
    ColdStart."""
    from harnessrl_jax import build, checks, stages
    from harnessrl_jax.evolver.cold_start import collect, derive, groups_path, save_seed_groups

    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):
        raise UserError(f"--out {out}: directory {out_dir} does not exist")
    checks.validate(config)
    run = build.setup(config)
    tasks, dropped = build.training_tasks(config, run.tasks)
    if max_tasks and max_tasks < len(tasks):
        keep = np.sort(np.random.default_rng(config.seed).choice(len(tasks), max_tasks, replace=False))
        tasks = [tasks[i] for i in keep]
    J = config.num_generations
    logging.info("cold start: %d tasks x %d groups x J=%d, %d regradings (%d LLM criteria dropped: no judge)",
                 len(tasks), groups, J, regradings, dropped)

    def sample(batch, seed):
        return stages.sample_groups(run, batch, seed=seed).responses

    def score(batch, responses):
        return stages.score_responses(run.judge, batch, responses)[0]

    seeds = collect(tasks, sample, score, groups=groups, regradings=regradings, batch_tasks=batch_tasks,
                    seed=config.seed, progress=logging.info)
    run.close()
    save_seed_groups(groups_path(out), seeds)
    meta = {"model_name": config.model_name, "tasks": len(tasks), "llm_criteria_dropped": dropped,
            "judge": config.judge.model or config.judge.base_url or "rule checkers only", "J": J,
            "groups": groups, "regradings": regradings, "max_new_tokens": config.max_new_tokens,
            "temperature": config.temperature, "seed": config.seed,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        cold = derive(seeds, meta=meta)
    except ValueError as e:
        raise UserError(f"{e} (the measurements are kept in {groups_path(out)})") from None
    cold.save(out)
    return cold


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if FLAGS.from_groups:
        from harnessrl_jax.evolver.cold_start import derive, load_seed_groups

        cold = derive(load_seed_groups(FLAGS.from_groups), meta={"from_groups": FLAGS.from_groups})
        cold.save(FLAGS.out)
    elif FLAGS.config is None:
        raise app.UsageError("--config (or --from_groups) is required")
    else:
        cold = run_cold_start(FLAGS.config, FLAGS.out, groups=FLAGS.groups, regradings=FLAGS.regradings,
                              batch_tasks=FLAGS.batch_tasks, max_tasks=FLAGS.max_tasks)
    rows = [("gammas", f"{', '.join(f'{g:.3f}' for g in cold.gammas)} ({cold.gammas_source})"),
            ("guidance band", f"[{cold.bands['guidance'][0]:.1f}, {cold.bands['guidance'][1]:.1f}] "
                              f"(low: {cold.band_sources['guidance_low']})"),
            ("rubric band", f"[{cold.bands['rubric'][0]:.1f}, {cold.bands['rubric'][1]:.1f}] "
                            f"(low: {cold.band_sources['rubric_low']})"),
            ("task-saturation threshold", f"{cold.task_mass_threshold:.3f} (median discriminative mass)"),
            ("anchored tasks", str(len(cold.anchors or {})))]
    for k, v in rows:
        print(f"{k:<26} {v}")
    for w in cold.warnings:
        print(f"warning: {w}")
    print(f"written: {FLAGS.out}")


if __name__ == "__main__":
    cli.run(main)
