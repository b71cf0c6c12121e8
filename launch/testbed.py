"""The planted-failure testbed: every arm on one world file, the same seeds and budget, each run measured against the
world's planted labels and its hidden oracle (docs/testbed.md).

    python launch/testbed.py --out=runs/testbed                                  # the default world, every arm
    python launch/testbed.py --world=my_world.jsonl --seeds=0,1,2 --steps=24 --out=runs/my_world
    python launch/testbed.py --arm=grpo --arm=harnessrl --out=runs/tb_two

Arms are launch/compare.py's (`NAME` or `NAME=KEY=VALUE,...`; eval.comparison), on experiments/testbed.py with
the world and steps given here; every arm shares the budget, sampling, tasks, judge and evaluation (LOCKED). Each
run trains into OUT/<arm>-s<seed>; its measurements go to testbed_outcome.json there (a rerun skips a measured
run), the comparison to OUT/testbed.json. Printed per arm: reward and oracle per step, the pair classes against the
hidden oracle, the share of each planted class still failing at the end and the planted surface features' net
pay, the attributor's precision and recall per planted class (and per surface feature), the reversal rate, the
final oracle score with run-level intervals, and the expectations of docs/testbed.md as held or not held.
"""

from __future__ import annotations

import copy
import gc
import json
import logging as std_logging
import os
import sys
import time

import jax
from absl import flags, logging

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402

ARMS = ("grpo", "harnessrl", "harnessrl_no_critic", "harnessrl_no_critic_no_memory", "ruscarl", "evorubric",
        "amaris_pp", "sec", "coca")

flags.DEFINE_string("world", "", "A world file (harnessrl_jax.data.world; default: the shipped default world).")
flags.DEFINE_string("out", "runs/testbed", "Directory of the runs and testbed.json.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds; every arm runs each.")
flags.DEFINE_integer("steps", 12, "Training steps of every run (12: the budget docs/testbed.md measured).")
flags.DEFINE_multi_string("arm", [], f"An arm (launch/compare.py's form); default: {', '.join(ARMS)}.")
flags.DEFINE_string("reference", "grpo", "The arm every interval is taken against.")
flags.DEFINE_integer("bootstrap", 10_000, "Resamples of the run-level intervals.")
FLAGS = flags.FLAGS

OUTCOME_FILE = "testbed_outcome.json"


def main(argv):
    del argv
    import launch.train as train
    from experiments import testbed as testbed_config
    from harnessrl_jax.data.world import DEFAULT_WORLD, load_world
    from harnessrl_jax.eval import tables, testbed
    from harnessrl_jax.eval.comparison import apply_overrides, check_locked, parse_arm

    train.use_compilation_cache(cli.compilation_cache_dir())  # every run after the first of a shape loads it
    logging.get_absl_handler().python_handler.addFilter(  # orbax logs every file it writes at INFO
        lambda r: r.levelno >= std_logging.WARNING or f"{os.sep}orbax{os.sep}" not in r.pathname)
    world_path = FLAGS.world or DEFAULT_WORLD
    world = load_world(world_path)
    base = testbed_config.get_config(f"world={world_path},steps={FLAGS.steps}")
    arms = dict(parse_arm(spec) for spec in (FLAGS.arm or ARMS))
    if FLAGS.reference not in arms:
        raise ValueError(f"--reference={FLAGS.reference!r} is not an arm ({list(arms)})")
    configs = {name: apply_overrides(base, ov) for name, ov in arms.items()}
    check_locked(base, configs, arms, ())
    os.makedirs(FLAGS.out, exist_ok=True)
    logging.info("world %s: %d tasks, %d planted criteria; %d arms x %d seeds x %d steps", world_path,
                 len(world.tasks), len(world.planted), len(arms), len(FLAGS.seeds), FLAGS.steps)
    runs = [(int(seed), name) for seed in FLAGS.seeds for name in arms]
    outcomes: dict[str, list] = {name: [] for name in arms}
    start, trained = time.perf_counter(), 0
    for n, (seed, name) in enumerate(runs):
        workdir = os.path.join(FLAGS.out, f"{name}-s{seed}")
        path = os.path.join(workdir, OUTCOME_FILE)
        if os.path.exists(path):
            with open(path) as f:
                outcome = json.load(f)
        else:
            config = copy.deepcopy(configs[name])
            with config.unlocked():
                config.seed = seed
            run_start = time.perf_counter()
            train.train(config, workdir)
            jax.clear_caches()
            gc.collect()
            outcome = testbed.run_outcome(workdir, world)
            outcome["wall_s"] = time.perf_counter() - run_start
            with open(f"{path}.tmp", "w") as f:
                json.dump(outcome, f)
            os.replace(f"{path}.tmp", path)
            trained += 1
        outcomes[name].append(outcome)
        elapsed = time.perf_counter() - start
        logging.info("run %d/%d %s seed %d: reward %.1f -> %.1f, oracle %.1f -> %.1f; %.1f min, ETA %.1f min",
                     n + 1, len(runs), name, seed, outcome["stats"]["reward_first"], outcome["stats"]["reward_last"],
                     outcome["stats"]["oracle_first"], outcome["stats"]["oracle_last"], elapsed / 60,
                     elapsed / max(trained, 1) * (len(runs) - n - 1) / 60)
    table = testbed.compare_outcomes(outcomes, FLAGS.reference, n=FLAGS.bootstrap)
    table["expectations"] = testbed.expectations(table, n=FLAGS.bootstrap)
    table["world"] = world_path
    table["wall_s"] = {name: [o.get("wall_s") for o in outs] for name, outs in outcomes.items()}
    with open(os.path.join(FLAGS.out, "testbed.json"), "w") as f:
        json.dump(table, f, indent=1, default=str)
    print(testbed.render(table))
    print("\nExpectations (docs/testbed.md, written before the first run):")
    print(tables.markdown(table["expectations"]))
    print(f"\nwall time: {(time.perf_counter() - start) / 60:.1f} min for {trained} runs trained here")


if __name__ == "__main__":
    cli.run(main)
