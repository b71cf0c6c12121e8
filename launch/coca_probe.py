"""CoCA's analysis tables for any run or compare directory: the dual-group probe of each checkpoint
(the criterion states and their transitions, also for an arm that never ran CoCA's two groups, e.g. RaR = rubric
GRPO) and Best-of-K on the held-out items (CoCA's Figure 4), with run-level intervals where there are seeds.

    python launch/coca_probe.py --dir=runs/coca_compare --arms=grpo,coca --heldout=DATA/heldout.jsonl
    python launch/coca_probe.py --dir=runs/grpo --split=train --steps=0,250,500

For each run (the directory itself, or a compare directory's `<arm>-s<seed>` runs) and each probed step (--steps:
the seed policy and every kept checkpoint by default), with one sampling seed (--seed) for every checkpoint and arm:
- probe: per training task (--probe_tasks of them, 0: all) a Normal group (bare prompt) and a Guided group (the whole
  rubric shown, CoCA's prompt and budget) of the run's config.coca.groups sizes, judged by the run's judge under the
  original rubric, each criterion diagnosed into CoCA's five states (config.coca's rule);
- Best-of-K: max(--ks) samples per held-out item (--heldout, or --split of a bundled set; --split=train: the
  training tasks), the exact expected best of each K.
Writes OUT/<arm>-s<seed>/coca.jsonl (coca.jsonl's format, one line per task and step), metrics.jsonl (per step:
coca/frac_*, probe/*, best_of_k/k<K>), best_of_k.json (every item's n scores per step) and OUT/coca_probe.json (the
Best-of-K rows per arm at each run's last probed step, margins against --reference with run-level intervals); a
rerun goes on from the checkpoints done. experiments/notebooks/coca_tables.ipynb prints the tables.
"""

from __future__ import annotations

import json
import logging as std_logging
import os
import sys

from absl import flags, logging

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli  # noqa: E402

flags.DEFINE_string("dir", None, "A run directory or a compare directory (launch/compare.py's --out).")
flags.DEFINE_list("arms", [], "The arms of a compare directory to probe (default: all).")
flags.DEFINE_string("out", "", "Output directory (default: DIR/coca_probe).")
flags.DEFINE_string("steps", "all", "'all' (0 and every kept checkpoint), 'final', or a comma list of steps.")
flags.DEFINE_list("ks", ["1", "2", "4", "8", "16"], "Best-of-K's K values; max(K) samples per held-out item.")
flags.DEFINE_string("split", "heldout", "Best-of-K's split of a bundled set ('train' = the training tasks).")
flags.DEFINE_string("heldout", "", "Best-of-K's held-out task JSONL file (required for a task-file source).")
flags.DEFINE_integer("probe_tasks", 0, "Training tasks the probe diagnoses per checkpoint (0: all; else a fixed "
                     "sample, the same for every checkpoint and arm).")
flags.DEFINE_integer("seed", 10_000, "Sampling seed (the same for every checkpoint and arm).")
flags.DEFINE_integer("batch_tasks", 16, "Tasks per engine call.")
flags.DEFINE_string("reference", "", "The arm Best-of-K margins are taken against (default: compare.json's "
                    "reference when it is probed, else none).")
flags.mark_flags_as_required(["dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from harnessrl_jax.errors import UserError
    from harnessrl_jax.eval import coca_probe, coca_tables, tables

    # orbax logs every file it reads at INFO; keep its warnings (as launch/train.py does)
    logging.get_absl_handler().python_handler.addFilter(
        lambda r: r.levelno >= std_logging.WARNING or f"{os.sep}orbax{os.sep}" not in r.pathname)
    try:
        ks = [int(k) for k in FLAGS.ks]
    except ValueError:
        raise UserError(f"--ks={','.join(FLAGS.ks)}: expected integers") from None
    if not ks or min(ks) < 1:
        raise UserError(f"--ks={','.join(FLAGS.ks)}: expected integers >= 1")
    runs = coca_probe.find_runs(FLAGS.dir, FLAGS.arms)
    reference = FLAGS.reference
    compare = os.path.join(FLAGS.dir, "compare.json")
    if not reference and os.path.isfile(compare):
        with open(compare, encoding="utf-8") as f:
            reference = json.load(f).get("reference") or ""
        reference = reference if reference in {r.arm for r in runs} else ""
    out = FLAGS.out or os.path.join(FLAGS.dir, "coca_probe")
    logging.info("probing %d runs (%s) into %s", len(runs), ", ".join(r.name for r in runs), out)
    summary = coca_probe.probe_runs(runs, out, steps=FLAGS.steps, seed=FLAGS.seed, ks=ks, split=FLAGS.split,
                                    heldout=FLAGS.heldout, probe_tasks=FLAGS.probe_tasks,
                                    batch_tasks=FLAGS.batch_tasks, reference=reference, log=logging.info)
    print(tables.markdown(coca_tables.best_of_k_rows(summary)))
    print()
    print(tables.markdown(coca_tables.state_rows(coca_tables.coca_runs(out), window=1)))
    print(f"written: {out}")


if __name__ == "__main__":
    cli.run(main)
