"""The agentic comparison: GRPO, the two- and six-harness mixtures and HarnessBandit, each over seeds, on the
workspace tasks (experiments/agentic_cpu.py), then the per-harness table and the bandit's terminal arm
probabilities.

    python launch/agentic_compare.py --workdir=DIR [--seeds=0,1,2] [--methods=grpo,mixture2,mixture,harnessbandit]
        [--steps=N] [--eval_tasks=N]

Each run is launch/train.py in DIR/<method>/seed<s> (a run with its agentic_eval.json is not run again); the table
goes to DIR/table.md with the bandit's final state per seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402

from harnessrl_jax.agentic.harnesses import HELDOUT_HARNESS, TRAIN_HARNESSES  # noqa: E402
from harnessrl_jax.eval import agentic_tables, bandit_tables  # noqa: E402
from harnessrl_jax.methods.agentic import EVAL_FILE  # noqa: E402
from harnessrl_jax.methods.harnessbandit import selection_probs  # noqa: E402

flags.DEFINE_string("workdir", None, "Where the runs and the table go.", required=True)
flags.DEFINE_list("seeds", ["0", "1", "2"], "Training seeds.")
flags.DEFINE_list("methods", ["grpo", "mixture2", "mixture", "harnessbandit"], "Methods (arms of the comparison).")
flags.DEFINE_integer("steps", None, "config.total_steps of every run (default: the config's).")
flags.DEFINE_integer("eval_tasks", None, "config.agentic.eval_tasks of every run (default: the config's, all 72).")
flags.DEFINE_string("config_arg", "", "Extra options of experiments/agentic_cpu.py (e.g. smoke).")
FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_dir(method: str, seed: str) -> str:
    return os.path.join(FLAGS.workdir, method, f"seed{seed}")


def train(method: str, seed: str) -> None:
    arg = ",".join(filter(None, [f"method={method}", FLAGS.config_arg]))
    cmd = [sys.executable, os.path.join(ROOT, "launch", "train.py"),
           f"--config={ROOT}/experiments/agentic_cpu.py:{arg}",
           f"--config.seed={seed}", f"--workdir={run_dir(method, seed)}"]
    if FLAGS.steps:
        cmd.append(f"--config.total_steps={FLAGS.steps}")
    if FLAGS.eval_tasks:
        cmd.append(f"--config.agentic.eval_tasks={FLAGS.eval_tasks}")
    os.makedirs(run_dir(method, seed), exist_ok=True)
    with open(os.path.join(run_dir(method, seed), "train.log"), "w") as log_file:
        subprocess.run(cmd, check=True, stdout=log_file, stderr=subprocess.STDOUT,
                       env={**os.environ, "PYTHONPATH": ROOT})


def terminal_probs(directory: str) -> list[tuple[str, float, float, int]]:
    """(arm, p, Q, visits) by descending p: selection_probs of the run's final Q and visits under its config."""
    h = bandit_tables.history(directory)
    with open(os.path.join(directory, "config.json")) as f:
        b = json.load(f)["bandit"]
    q, n = h["Q"][-1], h["n"][-1]
    p = selection_probs(q, n, bonus=b["bonus"], temperature=b["temperature"], floor=b["floor"])
    return sorted(((a, float(p[i]), float(q[i]), int(n[i])) for i, a in enumerate(h["labels"])), key=lambda r: -r[1])


def main(argv):
    del argv
    jobs = [(m, s) for m in FLAGS.methods for s in FLAGS.seeds]
    todo = [j for j in jobs if not os.path.isfile(os.path.join(run_dir(*j), EVAL_FILE))]
    begun = time.perf_counter()
    for n, (method, seed) in enumerate(todo, 1):
        start = time.perf_counter()
        train(method, seed)
        per_run = (time.perf_counter() - begun) / n
        logging.info("run %d/%d done: %s seed %s in %.0f s | ETA %.0f s", n, len(todo), method, seed,
                     time.perf_counter() - start, per_run * (len(todo) - n))
    results = {m: [agentic_tables.read_eval(run_dir(m, s)) for s in FLAGS.seeds] for m in FLAGS.methods}
    k = results[FLAGS.methods[0]][0]["k"]
    out = [f"Held-out tasks: {len(results[FLAGS.methods[0]][0]['tasks'])}, k = {k} episodes each, "
           f"{len(FLAGS.seeds)} seeds; +- is the 95% run-level half-width (Student t over seeds); held-out harness: "
           f"{HELDOUT_HARNESS}.", "",
           agentic_tables.table(results, TRAIN_HARNESSES + (HELDOUT_HARNESS,), baseline=FLAGS.methods[0])]
    if "harnessbandit" in FLAGS.methods:
        out += ["", "HarnessBandit's terminal arm probabilities (the next draw's p from the final Q and visits; Q, "
                "visits) per seed:"]
        for s in FLAGS.seeds:
            out.append(f"- seed {s}: " + ", ".join(f"{a} {p:.3f} (Q {q:.2f}, n {v})"
                                                   for a, p, q, v in terminal_probs(run_dir("harnessbandit", s))))
    text = "\n".join(out)
    with open(os.path.join(FLAGS.workdir, "table.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    app.run(main)
