"""Any set of arms (a method with config overrides) over the same seeds, budget, sampling settings and evaluation,
into one directory: held-out scores under the seed rubrics (and the rule stand-in oracle), the papers' statistics,
the checkpoint each table reads, steps and hours to the best step, and the pairwise oracle's classes.

    python launch/compare.py --base_config=experiments/smollm2_cpu.py --seeds=0,1,2 --out=runs/compare \\
        --arm=grpo --arm=harnessrl --arm=no_critic=method=harnessrl,harness.no_critic=true
    python launch/compare.py --preset=paper --eval_every=25 --oracle=anthropic ...   every arm of the paper

An arm is `NAME` (a registered method, or an arm of the preset) or `NAME=KEY=VALUE,KEY=VALUE` (dotted config keys).
Every arm keeps the base config's budget, sampling, task, judge and evaluation settings (LOCKED; an arm whose
definition changes one names it in --unlock; harnessrl_jax.eval.comparison) and, per seed, the same config.seed, and trains into
OUT/<name>-s<seed>. Each run is evaluated during training (config.eval, --eval_every steps; 0: its kept checkpoints
after training) on a validation split and on the reported test tasks, J = --eval_samples responses per task with
bare prompts and one sampling seed; --ood adds the OOD benchmarks at each evaluated step. With --oracle the
pairwise oracle judges each run's recorded groups (--oracle_steps). A run whose record is saved (compare_scores.json)
is not trained, evaluated or judged again, so a stopped comparison resumes.

compare.json: per arm and seed the test scores of every evaluated step (`per_step`), the validation and OOD macro
scores and the training hours at each (`validation`, `ood`, `hours`), the steps each pick reads (`picks`: final;
best on validation, step 0 excluded; the paper's best OOD step; the latest within `equal_compute_hours`),
`steps_to_best` and `hours_to_best` by seed, and `stats` per pick and score (eval.arm_tables.arm_stats: macro,
domain means, seed SD, margins against --reference with run-level intervals and the paper's cell-level ones).
experiments/notebooks/ print the tables.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import shutil
import sys
import time
from typing import Any

import jax
from absl import flags, logging
from ml_collections import config_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.errors import UserError  # noqa: E402

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
flags.DEFINE_integer("eval_every", None, "Evaluate every this many training steps, and at step 0 and the last (the "
                     "papers: 25); 0: only the kept checkpoints, after training (default: the base config's "
                     "eval.every, else its checkpoint.every).")
flags.DEFINE_integer("eval_samples", None, "Responses per evaluation item (default: the base config's "
                     "eval.num_samples, else num_generations).")
flags.DEFINE_string("validation", "", "A validation task JSONL file to choose the best step on (default: "
                    "--validation_share of each domain's held-out tasks, left out of the reported ones).")
flags.DEFINE_float("validation_share", None, "Share of each domain's held-out tasks kept for validation (default: "
                   "the base config's eval.validation_share).")
flags.DEFINE_integer("eval_max_prompt_len", None, "Prompt tokens an evaluation task may have (default: the base "
                     "config's eval.max_prompt_len, else max_prompt_len); the tasks over it are counted per domain.")
flags.DEFINE_list("ood", [], "OOD benchmarks evaluated at each evaluated step, NAME=PATH (eval.ood): the paper's own "
                  "pick is the best OOD step.")
flags.DEFINE_float("equal_compute_hours", 0.0, "The equal-compute budget in training hours (0: the reference arm's "
                   "mean hours to its best step, as the paper compares at HarnessRL's 17.5 h).")
flags.DEFINE_list("unlock", [], "Locked keys (LOCKED) the arms may change, because the comparison exists to change "
                  "them (e.g. num_generations for a rollout-budget ablation).")
flags.DEFINE_enum("oracle", "", ["", "anthropic", "openai"], "Judge each run's recorded groups with the pairwise "
                  "oracle (launch/oracle.py's clients): the failure shares, agreement and Spearman tables read it.")
flags.DEFINE_string("oracle_model", "claude-sonnet-5", "The oracle model.")
flags.DEFINE_string("oracle_base_url", "", "The oracle's server (OpenAI-compatible: with /v1; Anthropic: a proxy or "
                    "stand-in).")
flags.DEFINE_string("oracle_steps", "last:25", "Steps whose groups the oracle judges: 'last:N' (the tables' end of "
                    "training), 'a-b', a comma list, or '' (all; the oracle score curve).")
flags.DEFINE_integer("bootstrap", 10_000, "Bootstrap resamples over items and seeds (the papers: 10,000).")
flags.DEFINE_integer("permutations", 10_000, "Permutations of the paired sign-flip test.")
flags.DEFINE_bool("keep_checkpoints", True, "Keep each run's checkpoints after its evaluation (False: delete them "
                  "once its scores are saved; a 135M policy's checkpoints take ~1.6 GB each).")
FLAGS = flags.FLAGS

def arms_from_flags() -> dict[str, dict[str, str]]:
    from harnessrl_jax.eval.comparison import PAPER_ARMS, parse_arm

    specs = list(FLAGS.arm)
    if FLAGS.preset:
        if FLAGS.preset != "paper":
            raise ValueError(f"--preset={FLAGS.preset!r}: known presets: paper")
        specs = list(PAPER_ARMS) + specs
    if not specs:
        specs = list(FLAGS.methods)
    arms = {}
    for spec in specs:
        name, overrides = parse_arm(spec, FLAGS.unlock)
        if name in arms:
            raise ValueError(f"arm {name!r} is given twice")
        arms[name] = overrides
    return arms


def eval_settings(config) -> dict[str, Any]:
    """config.eval as the flags set it (every arm gets the same)."""
    e = dict(config.eval)
    every = FLAGS.eval_every if FLAGS.eval_every is not None else (e["every"] or config.checkpoint.every)
    e.update(every=every, split=FLAGS.eval_split, heldout=FLAGS.heldout, seed=FLAGS.eval_seed)
    for key, flag in (("num_samples", FLAGS.eval_samples), ("validation_share", FLAGS.validation_share),
                      ("max_prompt_len", FLAGS.eval_max_prompt_len)):
        if flag is not None:
            e[key] = flag
    if FLAGS.validation:
        e["validation"] = FLAGS.validation
    if FLAGS.ood:
        e["ood"] = ",".join(FLAGS.ood)
    return e


def judge_with_oracle(workdir: str, anchors: str | None) -> str:
    """The pairwise oracle over the run's recorded groups (--oracle_steps), as launch/oracle.py runs it; returns
    its anchors file. `anchors` is another run's of the same seed: every arm of a seed starts from the same seed
    policy with the same sampling settings (LOCKED), so the seed policy's anchor responses are the same and are
    sampled once per seed."""
    from harnessrl_jax.eval import oracle as lib
    from harnessrl_jax.eval.oracle_run import oracle_run, parse_steps, recorded_steps

    own = os.path.join(workdir, "oracle", "anchors.json")
    if anchors and os.path.exists(anchors) and not os.path.exists(own):
        os.makedirs(os.path.dirname(own), exist_ok=True)
        shutil.copyfile(anchors, own)
    steps = parse_steps(FLAGS.oracle_steps, recorded_steps(workdir))
    client = lib.make_client(FLAGS.oracle, FLAGS.oracle_model, base_url=FLAGS.oracle_base_url or None)
    oracle = lib.PairwiseOracle(client, os.path.join(workdir, "oracle", "oracle.sqlite"))
    try:
        summary = oracle_run(workdir, oracle, steps=steps, progress=logging.info)
    finally:
        oracle.close()
    logging.info("  oracle: %d groups of %d steps, agreement over the last steps %s", summary["groups"],
                 summary["steps"], summary[next(k for k in summary if k.startswith("last_"))]["oracle/agreement"])
    return own


def main(argv):
    del argv
    import launch.train as train
    from harnessrl_jax.eval import arm_tables, cadence, tables
    from harnessrl_jax.eval.comparison import (SCORES_FILE, apply_overrides, check_locked, compare_table,
                                               record_macro, run_record)

    arms = arms_from_flags()
    names = list(arms)
    reference = FLAGS.reference or ("harnessrl" if "harnessrl" in arms else names[-1])
    if reference not in arms:
        raise ValueError(f"--reference={reference!r} is not an arm ({names})")
    with FLAGS.base_config.unlocked():
        FLAGS.base_config.eval.update(eval_settings(FLAGS.base_config))
    configs = {name: apply_overrides(FLAGS.base_config, ov) for name, ov in arms.items()}
    check_locked(FLAGS.base_config, configs, arms, FLAGS.unlock)
    os.makedirs(FLAGS.out, exist_ok=True)
    records: dict[str, dict[str, dict]] = {m: {} for m in names}
    runs = [(int(seed), name) for seed in FLAGS.seeds for name in names]
    start, trained = time.perf_counter(), 0
    anchors: dict[int, str] = {}  # seed -> the oracle's anchor responses (the seed policy's)
    for n, (seed, name) in enumerate(runs):
        config = copy.deepcopy(configs[name])
        with config.unlocked():
            config.seed = seed
        workdir = os.path.join(FLAGS.out, f"{name}-s{seed}")
        logging.info("run %d/%d: %s (%s) seed %d -> %s", n + 1, len(runs), name, config.method, seed, workdir)
        path = os.path.join(workdir, SCORES_FILE)
        if os.path.exists(path):
            logging.info("  scores saved by an earlier comparison: %s", path)
            with open(path) as f:
                record = json.load(f)
            if "test" not in record:  # the layout before evaluation during training: kept checkpoints only
                raise UserError(f"{path} was written by an earlier launch/compare.py (its kept checkpoints only, no "
                                f"validation split): delete it to evaluate {workdir} again, or compare into a new "
                                f"--out")
            if FLAGS.oracle and not os.path.exists(os.path.join(workdir, "oracle", "oracle.jsonl")):
                anchors[seed] = judge_with_oracle(workdir, anchors.get(seed))  # a run compared without the oracle
            elif os.path.exists(os.path.join(workdir, "oracle", "anchors.json")):
                anchors.setdefault(seed, os.path.join(workdir, "oracle", "anchors.json"))
        else:
            train.train(config, workdir)
            if not config.eval.every:
                cadence.evaluate_checkpoints(config, workdir, progress=logging.info)
            jax.clear_caches()  # one process trains every arm: free each run's compiled steps and buffers
            gc.collect()
            if FLAGS.oracle:
                anchors[seed] = judge_with_oracle(workdir, anchors.get(seed))
            record = run_record(workdir)
            with open(f"{path}.tmp", "w") as f:
                json.dump(record, f)
            os.replace(f"{path}.tmp", path)
            trained += 1
            if not FLAGS.keep_checkpoints:
                shutil.rmtree(os.path.join(workdir, "checkpoints"), ignore_errors=True)
        records[name][str(seed)] = record
        elapsed = time.perf_counter() - start
        logging.info("%s seed %d: %d evaluated steps, final test %.1f (macro); %d/%d runs in %.0f min, ETA %.0f min",
                     name, seed, len(record["test"]), record_macro(record), n + 1, len(runs), elapsed / 60,
                     elapsed / max(trained, 1) * (len(runs) - n - 1) / 60)  # runs resumed from scores cost ~0

    table = compare_table(records, reference, configs, arms, FLAGS.base_config, unlocked=FLAGS.unlock,
                          equal_compute_hours=FLAGS.equal_compute_hours, n_boot=FLAGS.bootstrap,
                          n_perm=FLAGS.permutations)
    with open(os.path.join(FLAGS.out, "compare.json"), "w") as f:
        json.dump(table, f, indent=2, default=str)
    for pick in arm_tables.PICKS + (arm_tables.PAPER_PICK,):
        if pick == arm_tables.PAPER_PICK and not any(r["ood"] for rs in records.values() for r in rs.values()):
            continue
        print(f"\n{arm_tables.PICK_LABELS[pick]}:")
        print(tables.markdown(arm_tables.main_rows(table, names, pick=pick)))
    print()
    print(tables.markdown(arm_tables.time_rows(table, names)))
    print(arm_tables.seeds_note(table))


if __name__ == "__main__":
    cli.run(main)
